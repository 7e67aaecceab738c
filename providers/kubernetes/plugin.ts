export { KubernetesProvider } from './kubernetes-provider.js';

export { GcpProvider } from './gcp-provider.js';

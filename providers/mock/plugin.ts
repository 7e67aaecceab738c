export { MockProvider } from './mock-provider.js';

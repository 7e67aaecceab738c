// The plugin's entry point: the operator registers every exported class declared with @provider.
export { MemoryProvider } from './memory-provider.js';

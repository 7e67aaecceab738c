// The plugin's entry point: the operator imports it and registers every class exported here
// that is declared with @provider.
export { DirectoryProvider } from './directory-provider.js';

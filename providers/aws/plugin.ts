export { AwsProvider } from './aws-provider.js';

// The provider conformance kit: the contract every provider keeps, as a jest suite a plugin
// author runs against their own provider. CI runs it against every built-in provider.
export { describeProviderConformance, type ConformanceSubject } from './suite.js';
// Network failures as the runtime throws them: a plugin's error mapping must call each Transient.
export { networkErrorSamples, type NetworkErrorSample } from './network-errors.js';

// The provider conformance kit: the contract every provider keeps, as a jest suite a plugin
// author runs against their own provider. CI runs it against every built-in provider.
export { describeProviderConformance, type ConformanceSubject } from './suite.js';

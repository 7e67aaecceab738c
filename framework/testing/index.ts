// What a test of a handler or an operator built on the framework uses: a real control plane
// on loopback, schemaless CRDs, a self-signed certificate, and `eventually`.
export {
  ControlPlane,
  freePort,
  reapAbandoned,
  ensureBinaries,
  type ControlPlaneOptions,
  type ControlPlaneBinaries,
  type Progress,
} from '../control-plane/index.js';
export { schemalessCrd } from './schemaless-crd.js';
export { selfSignedCert } from './self-signed-cert.js';
export { eventually, type Check, type EventuallyOptions } from './eventually.js';

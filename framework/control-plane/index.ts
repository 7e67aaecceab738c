// A real etcd + kube-apiserver on loopback, as controller-runtime's envtest starts one: what
// the jest harness, the demo, `try-plugin` and the benchmarks launch. Product-free (the
// caller names its folder prefix); framework/testing re-exports it for tests.
export { ControlPlane, freePort, reapAbandoned, type ControlPlaneOptions } from './control-plane.js';
export { ensureBinaries, type ControlPlaneBinaries, type Progress } from './binaries.js';

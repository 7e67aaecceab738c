import { KubeConfig } from '@kubernetes/client-node';

/** Set by the jest global setup to the shared control plane's kubeconfig. */
export const KUBECONFIG_ENV = 'PROXY_OPERATOR_TEST_KUBECONFIG';

/** The folder prefix of this repository's control planes (tests and the demo reap each other's leftovers). */
export const CONTROL_PLANE_DIR_PREFIX = 'proxy-operator-cp-';

/** The shared test control plane's admin KubeConfig. */
export function testKubeConfig(): KubeConfig {
  const path = process.env[KUBECONFIG_ENV];
  if (!path) throw new Error(`${KUBECONFIG_ENV} is not set: run integration tests through jest (npm test)`);
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

/** A namespace name unique to one test, so suites sharing a control plane never collide. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
}

import { ControlPlane } from './control-plane.js';
import { KUBECONFIG_ENV } from './kube.js';

// One control plane per jest run, shared by every integration suite. A failure to start
// fails the run with the reason: integration tests are never silently skipped.
export default async function globalSetup(): Promise<void> {
  const cp = await ControlPlane.start({ progress: (m) => process.stderr.write(`[control-plane] ${m}\n`) });
  (globalThis as { __controlPlane?: ControlPlane }).__controlPlane = cp;
  process.env[KUBECONFIG_ENV] = cp.kubeconfigPath;
}

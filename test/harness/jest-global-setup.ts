import type { ControlPlane as ControlPlaneType } from '../../framework/testing/control-plane.js';

// One control plane per jest run, shared by every integration suite. A failure to start
// fails the run with the reason: integration tests are never silently skipped.
export default async function globalSetup(): Promise<void> {
  // Jest transpiles this file, but in ESM mode Node itself resolves its imports: it needs the
  // hooks (`.js` → `.ts`, TypeScript syntax) before the harness is imported.
  await import(new URL('./ts-hooks.ts', import.meta.url).href);
  const { ControlPlane } = await import('../../framework/testing/control-plane.js');
  const { CONTROL_PLANE_DIR_PREFIX, KUBECONFIG_ENV } = await import('./kube.js');
  const cp: ControlPlaneType = await ControlPlane.start({
    dirPrefix: CONTROL_PLANE_DIR_PREFIX,
    progress: (m) => process.stderr.write(`[control-plane] ${m}\n`),
  });
  (globalThis as { __controlPlane?: ControlPlaneType }).__controlPlane = cp;
  process.env[KUBECONFIG_ENV] = cp.kubeconfigPath;
}

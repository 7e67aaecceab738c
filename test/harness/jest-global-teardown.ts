import type { ControlPlane } from '../../framework/testing/control-plane.js';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __controlPlane?: ControlPlane }).__controlPlane?.stop();
}

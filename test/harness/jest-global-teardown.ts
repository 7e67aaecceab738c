import type { ControlPlane } from './control-plane.js';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __controlPlane?: ControlPlane }).__controlPlane?.stop();
}

import type { Proxy } from '../crds/proxy-types.js';
import { unhealthyGrace, type Autopilot } from './proxy-state-machine.js';
import type { ControllerSettings } from './settings.js';

/**
 * The autopilot's inputs to the state machine for one proxy: the clock, and its policy resolved
 * from the spec and the operator's flags (spec.rotation over --replace-unhealthy-after; no
 * maxAgeSeconds is 0, off). `bansDue` is ban-rotation.ts's answer, read before. Pure.
 */
export function autopilotPolicy(
  proxy: Proxy,
  settings: Pick<ControllerSettings, 'replaceUnhealthyAfterSeconds' | 'rotationDrainSeconds'>,
  now: Date,
  bansDue?: string,
): Autopilot {
  return {
    now,
    unhealthyAfterSeconds: unhealthyGrace(proxy, settings.replaceUnhealthyAfterSeconds),
    maxAgeSeconds: proxy.spec.rotation?.maxAgeSeconds ?? 0,
    drainSeconds: settings.rotationDrainSeconds,
    rotatesOnBans: proxy.spec.rotation?.whenCoolingDownOn !== undefined,
    bansDue,
  };
}

// The autopilot's clocks, read from status only (a restart or a new leader keeps them): the
// rotation on age with its drain, and the Unhealthy grace.
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  type HealthyReason,
  type Proxy,
} from '../../crds/proxy-types.js';
import { findCondition } from './status.js';
import type { Autopilot, ConditionIntent } from './types.js';

/** A rotation comes up to this fraction of maxAge early, by instance, so a fleet spreads out. */
export const ROTATION_JITTER = 0.1;

/** The default drain: the discovery API's default lease TTL, so a default lease can finish. */
export const DEFAULT_ROTATION_DRAIN_SECONDS = 300;

/** A stable number in [0, 1) per instance ID (FNV-1a): the same on every run and replica. */
export function rotationJitter(instanceID: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < instanceID.length; i++) {
    h ^= instanceID.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h / 2 ** 32;
}

/** Where a Managed proxy stands against its rotation on age. */
export type RotationClock =
  | { kind: 'off' }
  /** Not old enough yet: look again in `seconds`. */
  | { kind: 'waiting'; seconds: number }
  /** Old enough (or banned: `why`): start draining (needs a --max-unavailable slot). */
  | { kind: 'due'; ageSeconds: number; dueAfterSeconds: number; why?: string }
  /** Draining since `since`; `seconds` of the drain left. */
  | { kind: 'draining'; since: string; seconds: number }
  /** Drained: replace the instance now (its slot is held since the drain began). */
  | { kind: 'drained'; since: string };

/**
 * The rotation decision, from status only (a restart or a new leader keeps every clock): the
 * age runs from the Provisioned condition's turn to True (the instance came up), the drain
 * from status.replacement.startedAt. Turning maxAgeSeconds off mid-drain cancels the drain.
 */
export function rotationClock(
  proxy: Proxy,
  instanceID: string,
  autopilot: Autopilot | undefined,
): RotationClock {
  const maxAge = autopilot?.maxAgeSeconds ?? 0;
  if (!autopilot || (maxAge <= 0 && !autopilot.rotatesOnBans)) return { kind: 'off' };
  const now = autopilot.now.getTime();
  const replacement = proxy.status?.replacement;
  const phase = proxy.status?.phase;
  if (replacement?.cause === 'Rotation') {
    // Once its instance is deleted (Provisioning onwards) the drain is over, yet the record
    // stays until the new instance is Ready (it holds the slot). Without oldInstanceGoneAt a
    // new instance Unhealthy at its first probe would be "drained" and deleted at once, on
    // every try. Not the Provisioned reason: a failed get or delete overwrites Draining.
    if (replacement.oldInstanceGoneAt !== undefined || (phase !== 'Ready' && phase !== 'Unhealthy'))
      return { kind: 'off' };
    const drain = autopilot.drainSeconds ?? DEFAULT_ROTATION_DRAIN_SECONDS;
    const since = Date.parse(replacement.startedAt);
    const elapsed = Number.isNaN(since) ? drain : Math.max(0, (now - since) / 1000);
    if (elapsed >= drain) return { kind: 'drained', since: replacement.startedAt };
    return { kind: 'draining', since: replacement.startedAt, seconds: Math.ceil(drain - elapsed) };
  }
  if (replacement !== undefined) return { kind: 'off' };
  if (autopilot.bansDue) return { kind: 'due', ageSeconds: 0, dueAfterSeconds: 0, why: autopilot.bansDue };
  if (maxAge <= 0) return { kind: 'off' };
  const up = findCondition(proxy, CONDITION_PROVISIONED);
  const born =
    up?.status === 'True' && up.lastTransitionTime ? Date.parse(up.lastTransitionTime) : Number.NaN;
  const dueAfter = maxAge * (1 - ROTATION_JITTER * rotationJitter(instanceID));
  if (Number.isNaN(born)) return { kind: 'waiting', seconds: Math.ceil(dueAfter) };
  const age = Math.max(0, (now - born) / 1000);
  if (age >= dueAfter)
    return { kind: 'due', ageSeconds: Math.floor(age), dueAfterSeconds: Math.ceil(dueAfter) };
  return { kind: 'waiting', seconds: Math.ceil(dueAfter - age) };
}

/** The grace the proxy's own field sets, else the fleet default (the schema cannot know the flag). */
export function unhealthyGrace(proxy: Proxy, fleetDefault: number): number {
  return proxy.spec.rotation?.unhealthyAfterSeconds ?? fleetDefault;
}

/** Where a proxy stands against its Unhealthy grace: not applicable, waiting `seconds` more, or due. */
export type UnhealthyClock =
  { kind: 'off' } | { kind: 'waiting'; seconds: number } | { kind: 'due'; since: string; forSeconds: number };

/**
 * How long the proxy has been Unhealthy, from the stored Healthy condition's transition time:
 * status, not memory, so a restart or a new leader keeps the clock. A verdict that makes it
 * Unhealthy only now starts the clock now.
 */
export function unhealthyClock(
  proxy: Proxy,
  healthy: ConditionIntent<HealthyReason>,
  autopilot: Autopilot | undefined,
): UnhealthyClock {
  const grace = autopilot?.unhealthyAfterSeconds ?? 0;
  // InvalidProbeTarget is a spec mistake a new instance cannot fix.
  if (!autopilot || grace <= 0 || healthy.status !== 'False' || healthy.reason === 'InvalidProbeTarget')
    return { kind: 'off' };
  const stored = findCondition(proxy, CONDITION_HEALTHY);
  const since =
    stored?.status === 'False' && stored.lastTransitionTime
      ? Date.parse(stored.lastTransitionTime)
      : Number.NaN;
  const now = autopilot.now.getTime();
  if (Number.isNaN(since)) return { kind: 'waiting', seconds: grace };
  const elapsed = Math.max(0, (now - since) / 1000);
  if (elapsed >= grace)
    return { kind: 'due', since: new Date(since).toISOString(), forSeconds: Math.floor(elapsed) };
  return { kind: 'waiting', seconds: Math.ceil(grace - elapsed) };
}

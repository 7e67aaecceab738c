// Whether the autopilot may repair (replace) an Unhealthy Managed proxy now, or must hold
// because the failure more likely has one shared cause than many dead proxies. A shared cause
// (the probe target down, the operator's egress or DNS broken) turns every proxy Unhealthy at
// once; replacing them would throw away every IP and fix nothing. As Karpenter's node repair
// does, two signals hold repairs: the probe target fails when checked directly, without a
// proxy; or more than a fraction of the provider's proxies are Unhealthy at once.

/** What the direct check (no proxy) last said of a probe URL. */
export type TargetReading =
  | { kind: 'reachable' }
  | { kind: 'unreachable'; message: string }
  /** Not checked yet in this leadership term (the first check runs at the next health sync). */
  | { kind: 'unknown' };

/** Why repairs hold: a closed list, the reason on the Proxies' condition, Event and metric. */
export type RepairHoldReason = 'ProbeTargetUnreachable' | 'ProbeTargetUnchecked' | 'FleetUnhealthy';

export const REPAIR_HOLD_REASONS: readonly RepairHoldReason[] = [
  'ProbeTargetUnreachable',
  'ProbeTargetUnchecked',
  'FleetUnhealthy',
];

export type RepairHold = { kind: 'go' } | { kind: 'hold'; reason: RepairHoldReason; message: string };

export interface RepairHoldInputs {
  provider: string;
  probeURL: string;
  /** The direct check of this proxy's probe URL. */
  target: TargetReading;
  /** The provider's Managed proxies whose phase is Unhealthy, this one included. */
  unhealthy: number;
  /** The provider's Managed proxies (not being deleted). */
  total: number;
  /** `--repair-hold-unhealthy-percent`; 100 turns the fleet rule off. */
  maxUnhealthyPercent: number;
}

/** 20 %, as Karpenter's node repair: more Unhealthy proxies than that at once look like one cause. */
export const DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT = 20;

/**
 * How many of `total` proxies may be Unhealthy at once with repairs going on: the percentage,
 * rounded down, never below 1 (a small fleet can still repair its one dead proxy).
 */
export function unhealthyAllowed(total: number, percent: number): number {
  return Math.max(1, Math.floor((percent * total) / 100));
}

/**
 * The decision. The direct check comes first (it names the cause); then the fleet rule. An
 * unchecked target holds too: a restarted operator must not repair a fleet the first second,
 * before it knows whether the target answers (the first check follows within a health sync).
 */
export function repairHold(i: RepairHoldInputs): RepairHold {
  if (i.target.kind === 'unreachable')
    return {
      kind: 'hold',
      reason: 'ProbeTargetUnreachable',
      message: `repair held: the probe target ${i.probeURL} fails when the operator checks it directly, without a proxy (${i.target.message}); a new instance would not fix that`,
    };
  if (i.target.kind === 'unknown')
    return {
      kind: 'hold',
      reason: 'ProbeTargetUnchecked',
      message: `repair held: the probe target ${i.probeURL} has not been checked directly yet`,
    };
  if (i.maxUnhealthyPercent < 100) {
    const allowed = unhealthyAllowed(i.total, i.maxUnhealthyPercent);
    if (i.unhealthy > allowed)
      return {
        kind: 'hold',
        reason: 'FleetUnhealthy',
        message: `repair held: more than ${i.maxUnhealthyPercent}% of provider ${i.provider}'s proxies are Unhealthy at once (--repair-hold-unhealthy-percent): a shared cause is likelier than that many dead proxies`,
      };
  }
  return { kind: 'go' };
}

/** What the shell remembers of a proxy's hold: its reason, and when its cause ended (ms). */
export interface HoldMemory {
  reason?: RepairHoldReason;
  liftedAt?: number;
}

/**
 * The hold as it ends. A shared outage ends proxy by proxy: once the Unhealthy share falls to
 * what is allowed, the last ones are still Unhealthy and long past a grace that ran while they
 * were held; replacing them would throw away IPs that recover seconds later. So a proxy that
 * was held gets its full grace again from the moment its cause ended; held time never counts.
 * Pure: `memory` is what the shell kept, `liftedAt` what it should keep next.
 */
export function holdAfterLift(
  decision: RepairHold,
  memory: HoldMemory,
  now: number,
  graceSeconds: number,
): { hold: RepairHold; liftedAt?: number } {
  if (decision.kind === 'hold') return { hold: decision };
  if (memory.reason === undefined) return { hold: decision };
  const liftedAt = memory.liftedAt ?? now;
  // The message is the same for the whole wait: one status write, one Event.
  if (now - liftedAt >= graceSeconds * 1000) return { hold: decision };
  return {
    hold: {
      kind: 'hold',
      reason: memory.reason,
      message: `repair held: its shared cause (${memory.reason}) ended at ${new Date(liftedAt).toISOString()}; held time does not count toward the grace, so this proxy gets ${graceSeconds} s from then to recover`,
    },
    liftedAt,
  };
}

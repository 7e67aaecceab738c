import type { ProbeOutcome, ProbeReason } from './probe-reason.js';

/** The engine's opinion of one proxy, as handed to transition listeners. */
export interface Verdict {
  healthy: boolean;
  /** Duration of the most recent SUCCESSFUL probe (last value, no smoothing); 0 if none yet. */
  latencyMillis: number;
  /** Reason of the latest probe that agrees with `healthy` (so a healthy verdict never carries a failure reason). */
  reason: ProbeReason;
  message: string;
  /** When the latest probe finished. */
  checkedAt: Date;
  consecutiveSuccesses: number;
  consecutiveFailures: number;
}

export interface Thresholds {
  failureThreshold: number;
  successThreshold: number;
}

/**
 * When a latency change alone is worth a status write: while healthy, `confirmations`
 * consecutive successful probes each differ from the last EMITTED latency by more than
 * `relativeChange` x max(lastEmitted, floorMillis). The floor keeps millisecond jitter on
 * fast links (1 ms -> 2 ms is +100%) from counting; the confirmations keep one slow probe
 * (a GC pause, a busy node) from costing two writes (out and back).
 */
export interface LatencyPolicy {
  relativeChange: number;
  floorMillis: number;
  confirmations: number;
}

export const DEFAULT_LATENCY_POLICY: LatencyPolicy = {
  relativeChange: 0.5,
  floorMillis: 100,
  confirmations: 2,
};

/** Everything the decision needs to remember between probes of one target. */
export interface HealthState {
  consecutiveSuccesses: number;
  consecutiveFailures: number;
  /** undefined = no verdict yet (neither threshold reached since the target appeared). */
  verdict: Verdict | undefined;
  /** Latency carried by the last emitted verdict; the reference for the latency rule. */
  emittedLatencyMillis: number | undefined;
  /** Latest successful probe duration, kept even before the first verdict. */
  lastSuccessLatencyMillis: number;
  /** Consecutive successes whose latency is outside the band around the emitted latency. */
  latencyOutliers: number;
}

export const INITIAL_HEALTH_STATE: HealthState = {
  consecutiveSuccesses: 0,
  consecutiveFailures: 0,
  verdict: undefined,
  emittedLatencyMillis: undefined,
  lastSuccessLatencyMillis: 0,
  latencyOutliers: 0,
};

export type TransitionCause = 'first-verdict' | 'became-healthy' | 'became-unhealthy' | 'latency-changed';

export interface Decision {
  state: HealthState;
  /** Set when the new verdict must be published (i.e. is worth a status write). */
  transition: TransitionCause | undefined;
}

export function latencyChangedEnough(previous: number, current: number, policy: LatencyPolicy): boolean {
  return Math.abs(current - previous) > policy.relativeChange * Math.max(previous, policy.floorMillis);
}

/** Pure threshold + transition logic: one probe outcome in, next state and whether to publish out. */
export function decide(
  state: HealthState,
  outcome: ProbeOutcome,
  checkedAt: Date,
  thresholds: Thresholds,
  policy: LatencyPolicy = DEFAULT_LATENCY_POLICY,
): Decision {
  const consecutiveSuccesses = outcome.success ? state.consecutiveSuccesses + 1 : 0;
  const consecutiveFailures = outcome.success ? 0 : state.consecutiveFailures + 1;
  const latencyMillis = outcome.success ? Math.round(outcome.durationMillis) : state.lastSuccessLatencyMillis;

  const previous = state.verdict;
  let healthy = previous?.healthy;
  if (consecutiveSuccesses >= thresholds.successThreshold) healthy = true;
  if (consecutiveFailures >= thresholds.failureThreshold) healthy = false;

  const outside =
    outcome.success &&
    state.emittedLatencyMillis !== undefined &&
    latencyChangedEnough(state.emittedLatencyMillis, latencyMillis, policy);
  const latencyOutliers = outside ? state.latencyOutliers + 1 : 0;

  const base: HealthState = {
    ...state,
    consecutiveSuccesses,
    consecutiveFailures,
    lastSuccessLatencyMillis: latencyMillis,
    latencyOutliers,
  };
  if (healthy === undefined) return { state: base, transition: undefined };

  // A probe that disagrees with the (unchanged) status leaves reason/message alone.
  const agrees = outcome.success === healthy;
  const verdict: Verdict = {
    healthy,
    latencyMillis,
    reason: agrees || !previous ? outcome.reason : previous.reason,
    message: agrees || !previous ? outcome.message : previous.message,
    checkedAt,
    consecutiveSuccesses,
    consecutiveFailures,
  };

  let transition: TransitionCause | undefined;
  if (!previous) transition = 'first-verdict';
  else if (previous.healthy !== healthy) transition = healthy ? 'became-healthy' : 'became-unhealthy';
  else if (healthy && latencyOutliers >= policy.confirmations) transition = 'latency-changed';

  if (!transition) return { state: { ...base, verdict }, transition };
  return { state: { ...base, verdict, emittedLatencyMillis: latencyMillis, latencyOutliers: 0 }, transition };
}

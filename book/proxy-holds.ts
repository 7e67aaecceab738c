// Why the book keeps a proxy out of every lease ahead of its status: a suspicion raised by an
// unreachable report (until a probe that started after it passes), or the health engine's
// unhealthy verdict (until the status catches up). The rules are pure and table-tested; the
// store only keeps one HoldState per proxy and asks them.
import type { HealthObservation, HoldReason } from './lease-store.js';

export interface SuspicionPolicy {
  /** A suspicion no probe answered ends after this long (no health engine is listening). */
  timeoutMillis: number;
  /** After a suspicion ended with a passing probe, reports on that address are not believed this long. */
  holdoffMillis: number;
}

export const DEFAULT_SUSPICION_TIMEOUT_SECONDS = 60;
export const DEFAULT_SUSPICION_HOLDOFF_SECONDS = 5;

/** What the book remembers of one proxy; every field is about `address` only. */
export interface HoldState {
  address: string;
  /** When the running suspicion began (ms since the epoch); absent = not suspect. */
  suspectSince?: number;
  /** When the last suspicion ended with a passing probe. */
  clearedAt?: number;
  /** The health engine's verdict is unhealthy. */
  down?: boolean;
}

export type UnreachableVerdict =
  /** Suspect from now; the health engine is asked to probe. */
  | 'raised'
  /** Already suspect: nothing more, no second probe. */
  | 'already_suspect'
  /** A probe passed moments ago: the report is not believed (the abuse guard). */
  | 'not_believed';

/** An unreachable report about `address` at `now`. */
export function onUnreachable(
  state: HoldState | undefined,
  address: string,
  now: number,
  policy: SuspicionPolicy,
): { verdict: UnreachableVerdict; state: HoldState } {
  const current = state?.address === address ? state : undefined;
  if (current !== undefined && isSuspect(current, address, now, policy)) {
    return { verdict: 'already_suspect', state: current };
  }
  if (current?.clearedAt !== undefined && now - current.clearedAt < policy.holdoffMillis) {
    return { verdict: 'not_believed', state: current };
  }
  return { verdict: 'raised', state: { ...current, address, suspectSince: now } };
}

/** The health engine's news; undefined = nothing left to remember. */
export function onObservation(
  state: HoldState | undefined,
  observation: HealthObservation,
  now: number,
): HoldState | undefined {
  if (observation.kind === 'down') {
    // The verdict holds it now; a suspicion has nothing more to wait for.
    return { address: observation.address, down: true };
  }
  if (state === undefined || state.address !== observation.address) return state;
  if (observation.kind === 'up') return withoutEmpty({ ...state, down: undefined });
  // probe_passed: only the recheck asked for this very suspicion answers it.
  if (state.suspectSince === undefined || observation.suspicion !== suspicionToken(state.suspectSince))
    return state;
  return { address: state.address, clearedAt: now, ...(state.down ? { down: true } : {}) };
}

/** A suspicion's token for probe requests: when it began, on the book's own clock. */
export function suspicionToken(suspectSince: number): string {
  return String(suspectSince);
}

/**
 * A record changed. A new address needs no hold of ours. A down hold outlives the status
 * catching up (unhealthy): a replica whose cache still shows the proxy healthy would lease it
 * the moment the hold went, so it stays until the verdict is healthy again: an `up`, or a
 * status turning healthy after it was not (`wasHealthy`: the record before; a replica seeing
 * that is past the unhealthy status itself, and one lagging behind it still sees unhealthy).
 */
export function onRecordChanged(
  state: HoldState | undefined,
  record: { address: string; healthy: boolean },
  wasHealthy?: boolean,
): HoldState | undefined {
  if (state === undefined) return undefined;
  if (state.address !== record.address) return undefined;
  if (state.down && record.healthy && wasHealthy === false)
    return withoutEmpty({ ...state, down: undefined });
  return state;
}

export function isSuspect(
  state: HoldState | undefined,
  address: string,
  now: number,
  policy: SuspicionPolicy,
): boolean {
  return (
    state?.address === address &&
    state.suspectSince !== undefined &&
    now - state.suspectSince < policy.timeoutMillis
  );
}

/** Whether the book holds the proxy at `address` out of leases now, and why. */
export function holdOf(
  state: HoldState | undefined,
  address: string,
  now: number,
  policy: SuspicionPolicy,
): HoldReason | undefined {
  if (state?.address !== address) return undefined;
  if (state.down) return 'down';
  return isSuspect(state, address, now, policy) ? 'suspect' : undefined;
}

/** True when the state holds nothing a later call could still use (the store may drop it). */
export function isForgettable(state: HoldState, now: number, policy: SuspicionPolicy): boolean {
  if (state.down || isSuspect(state, state.address, now, policy)) return false;
  return state.clearedAt === undefined || now - state.clearedAt >= policy.holdoffMillis;
}

function withoutEmpty(state: HoldState): HoldState | undefined {
  const { address, suspectSince, clearedAt, down } = state;
  if (suspectSince === undefined && clearedAt === undefined && !down) return undefined;
  return {
    address,
    ...(suspectSince === undefined ? {} : { suspectSince }),
    ...(clearedAt === undefined ? {} : { clearedAt }),
    ...(down ? { down: true } : {}),
  };
}

// The decisions of the book's fair share among tokens (book-turns.ts is the shell that keeps
// the queues): start-time fair queueing. A process lets a bounded number of book operations
// run at once; beyond that each token waits in a FIFO of its own, and the next to run is the
// waiting head with the smallest start tag. A token's tag starts where its previous
// operation's finished (start + cost) or at the share's virtual time (the tag of the last
// one dispatched), whichever is later: a token with a backlog has tags far ahead, a token
// that arrives idle gets the current virtual time and runs next, so another token's backlog
// delays it by at most the operations already running (one each slot), never by the backlog.

export interface FairShareLimits {
  /** Book operations one process runs at once (`--discovery-book-concurrency`). */
  inFlight: number;
  /** Operations one token may have waiting; beyond it 429 book_queue_full. */
  queuedPerToken: number;
}

export const DEFAULT_FAIR_SHARE_LIMITS: FairShareLimits = { inFlight: 16, queuedPerToken: 256 };

/** The limits, checked: each a positive integer (an error naming the one that is not). */
export function fairShareLimits(limits: FairShareLimits): FairShareLimits {
  for (const key of ['inFlight', 'queuedPerToken'] as const) {
    if (!Number.isInteger(limits[key]) || limits[key] < 1)
      throw new Error(`fairShare.${key} must be a positive integer, got ${limits[key]}`);
  }
  return limits;
}

/** What happens to an arriving operation: it runs now, waits its turn, or is refused. */
export type Admission = 'run' | 'queue' | 'book_queue_full';

export interface ShareLoad {
  /** Operations running now. */
  inFlight: number;
  /** Operations waiting, every token's. */
  queued: number;
  /** Operations the arriving one's token has waiting. */
  queuedOfToken: number;
}

/**
 * `bounded` false: an operation whose caller bounds its own numbers (the gateway's, one per
 * client connection or held lease) waits whatever the token's queue holds.
 */
export function admit(load: ShareLoad, limits: FairShareLimits, bounded = true): Admission {
  // Runs at once only with nobody waiting: it must not overtake a queued operation.
  if (load.queued === 0 && load.inFlight < limits.inFlight) return 'run';
  if (bounded && load.queuedOfToken >= limits.queuedPerToken) return 'book_queue_full';
  return 'queue';
}

/** An operation's start tag: its token's last finish tag, or the virtual time if later. */
export function startTag(virtualTime: number, tokenFinish: number): number {
  return Math.max(virtualTime, tokenFinish);
}

/** A token's waiting head, as the choice of the next to run sees it. */
export interface WaitingHead {
  start: number;
  /** Arrival order in the process: breaks ties (the earlier arrival first). */
  seq: number;
}

/** The index of the head to run next (the smallest start tag, then the earliest); -1: none. */
export function nextHead(heads: readonly WaitingHead[]): number {
  let best = -1;
  for (const [i, h] of heads.entries()) {
    const b = heads[best];
    if (b === undefined || h.start < b.start || (h.start === b.start && h.seq < b.seq)) best = i;
  }
  return best;
}

/**
 * What an operation costs in the share: a report batch costs its items (one Lua step of 100
 * reports is 100 reports' work), every other operation 1. At least 1, at most `max`.
 */
export function operationCost(items: number | undefined, max: number): number {
  if (items === undefined || !Number.isFinite(items)) return 1;
  return Math.min(max, Math.max(1, Math.floor(items)));
}

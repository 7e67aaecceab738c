// The outcomes of writes by their request id (the API's Idempotency-Key), for the memory
// store: a client that got no answer (its connection dropped, the call timed out) sends the
// same request again with the same id and gets the first outcome, instead of a second lease
// or a second ban. Kept for a fixed time and capped in number: every entry lives as long, so
// the oldest is the first to end and the one a full log forgets.
import { scopedKey } from './lease-owner.js';

/** Outcomes kept at most: ~200 bytes each beside the leases they point at. */
export const MAX_REMEMBERED_REQUESTS = 100_000;

/** The calls a request id makes idempotent. */
export type RequestKind = 'lease' | 'renew' | 'release' | 'report' | 'reports';

/**
 * The key of one request: its kind, the owner's request id, and the lease it is about, so
 * an id reused on another lease (or for another call) is another request.
 */
export function requestKey(
  kind: RequestKind,
  owner: string | undefined,
  requestID: string | undefined,
  leaseID = '',
): string | undefined {
  if (requestID === undefined) return undefined;
  return `${kind}:${scopedKey(owner, requestID)}:${leaseID}`;
}

export class RequestOutcomes<T> {
  private readonly outcomes = new Map<string, { until: number; outcome: T }>();

  constructor(
    private readonly retentionMillis: number,
    private readonly max = MAX_REMEMBERED_REQUESTS,
  ) {}

  /** The outcome first recorded under `key`, while it is kept. */
  recall(key: string | undefined, now: number): T | undefined {
    if (key === undefined) return undefined;
    this.expire(now);
    return this.outcomes.get(key)?.outcome;
  }

  remember(key: string | undefined, outcome: T, now: number): void {
    if (key === undefined) return;
    this.expire(now);
    if (this.outcomes.size >= this.max) this.outcomes.delete(this.outcomes.keys().next().value!);
    this.outcomes.set(key, { until: now + this.retentionMillis, outcome });
  }

  get size(): number {
    return this.outcomes.size;
  }

  /** Forgets ended outcomes: the oldest first, so it stops at the first that still runs. */
  expire(now: number): void {
    for (const [key, { until }] of this.outcomes) {
      if (until > now) break;
      this.outcomes.delete(key);
    }
  }
}

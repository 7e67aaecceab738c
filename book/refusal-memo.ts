// Refusals answered again without walking the fleet (issue 47 item 4). A 409 all_busy or
// all_cooling_down costs a walk over every matching proxy (the memory store's index, the
// Redis store's chunks of candidates: ~8 scripts carrying ~10,000 records at 10,000
// proxies). The same request refused again is the same answer until the book changes in a
// way that could turn it into a grant: a slot freed, a hold lifted, the catalog changed (the
// store's `version`), or the first matching cooldown ends. A store remembers each refusal
// with the version read before its walk and answers the next one from here while the version
// holds, for at most REFUSAL_MEMO_MILLIS after the walk's answer: what bounds the changes a
// store cannot see (a shared book's lease expiring unreleased, a suspicion timing out
// unanswered). The bound counts from the answer, not the walk's start: a walk slower than the
// bound (10,000 candidates behind a busy Redis) would otherwise be forgotten as it is made.
// A walk's answer is already as old as the walk for the proxies it read first, so such a
// change is missed for at most the walk's time and the bound.
import type { AcquireResult, LeaseRequest } from './lease-store.js';

/** How long a remembered refusal is answered at most, whatever the version says. */
export const REFUSAL_MEMO_MILLIS = 1000;
/** Request shapes remembered at most (least recently refused forgotten first). */
export const MAX_REFUSAL_MEMOS = 256;

export interface RememberedRefusal {
  reason: 'all_busy' | 'all_cooling_down';
  /** When the first matching cooldown ends (ms), if any runs: a proxy may be free then. */
  firstEnd?: number;
  /** The store's version at the walk (undefined: unknown, so never answered again). */
  version?: string;
  /** Answered again until then (ms, the store's clock): the bound after the walk's answer. */
  until: number;
}

/**
 * The shape of a request a refusal is remembered by: selector, exit IP, target, and the
 * owner (its scope). A session's request is never remembered (its binding may move it), nor
 * one with an exclusion: its refusal says nothing of the same request without it (proxies it
 * skipped may be free), and such requests are rare (a crawler asking ahead).
 */
export function refusalKey(request: LeaseRequest): string | undefined {
  if (request.session !== undefined || (request.exclude?.size ?? 0) > 0) return undefined;
  return `${request.owner ?? ''}\u0000${request.target ?? ''}\u0000${request.exitIP?.text ?? ''}\u0000${JSON.stringify(request.selector)}`;
}

/**
 * The refusal to remember from a walk's answer. `now`: when the walk started (its version was
 * read then), on the store's clock: the cooldowns' ends count from it, the earliest they can
 * be. `answeredAt`: when its answer came (the same clock); the bound counts from it.
 */
export function rememberRefusal(
  result: AcquireResult & { granted: false },
  version: string | undefined,
  now: number,
  /** When the first cooldown among the matches ends (all_busy has no Retry-After to say it). */
  coolingEnd?: number,
  answeredAt = now,
): RememberedRefusal | undefined {
  // no_match is never remembered; a quota refusal is the owner's, not the request shape's.
  if (result.reason === 'no_match' || result.reason === 'lease_quota') return undefined;
  const firstEnd = result.retryAfterMs === undefined ? coolingEnd : now + result.retryAfterMs;
  return {
    reason: result.reason,
    ...(firstEnd === undefined ? {} : { firstEnd }),
    ...(version === undefined ? {} : { version }),
    until: Math.min(Math.max(now, answeredAt) + REFUSAL_MEMO_MILLIS, firstEnd ?? Infinity),
  };
}

/**
 * Whether a request may take the answer of a walk already in flight for its shape instead of
 * walking too: only a request a memo predicts refused (else it likely gets a lease of its
 * own), and only while the book's version is the one that walk read before it started (no
 * slot freed, no hold lifted, no catalog changed since: what the walk cannot have seen is what
 * the memo's bound allows). A walk that ends in a grant answers only its own request; the
 * others walk then.
 */
export function mayShareWalk(
  predictedRefused: boolean,
  walkVersion: string | undefined,
  version: string | undefined,
): boolean {
  return predictedRefused && walkVersion !== undefined && walkVersion === version;
}

/** Whether a remembered refusal still answers a request at `now`, the store at `version`. */
export function stillRefused(memo: RememberedRefusal, version: string, now: number): boolean {
  return memo.version !== undefined && memo.version === version && now < memo.until;
}

/** The remembered refusal as the acquire's answer at `now`. */
export function refusalAt(memo: RememberedRefusal, now: number): AcquireResult {
  return memo.reason === 'all_cooling_down'
    ? { granted: false, reason: memo.reason, retryAfterMs: Math.max(0, (memo.firstEnd ?? now) - now) }
    : { granted: false, reason: memo.reason };
}

/** The remembered refusals, bounded, least recently refused first. */
export class RefusalMemos {
  private readonly memos = new Map<string, RememberedRefusal>();

  constructor(private readonly max = MAX_REFUSAL_MEMOS) {}

  get(key: string | undefined): RememberedRefusal | undefined {
    return key === undefined ? undefined : this.memos.get(key);
  }

  set(key: string | undefined, memo: RememberedRefusal | undefined): void {
    if (key === undefined) return;
    this.memos.delete(key);
    if (memo === undefined) return;
    if (this.memos.size >= this.max) this.memos.delete(this.memos.keys().next().value!);
    this.memos.set(key, memo);
  }

  get size(): number {
    return this.memos.size;
  }
}

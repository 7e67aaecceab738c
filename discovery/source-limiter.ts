// Requests without a valid token are limited per source address, and the check comes before
// any hashing (issue 48 item 5): a client that keeps failing authentication is answered 429
// from a map lookup, so it cannot spend the event loop the probes share on SHA-256. Only
// failures take from an address's bucket: a valid client behind the same address is never
// slowed by this limiter while its own requests authenticate.
//
// Behind N replicas on one shared book, each failure is also counted there (`share`), so a
// guesser gets one burst across every replica, not one per replica. That count is asked
// after the failure, never before a check: the check stays a map lookup, and what a replica
// knows of the shared count is its last answer (attempts in flight meanwhile get through, and
// are charged). When the book cannot be reached the process's own count stands alone: the
// limit never locks every client out because Redis is down.
import { take, checkLimits, type Bucket, type BucketLimits } from './token-bucket.js';

export const DEFAULT_FAILED_AUTH_LIMITS: BucketLimits = Object.freeze({ ratePerSecond: 5, burst: 20 });
/** Addresses remembered; beyond it the least recently failing is forgotten (a full bucket again). */
export const MAX_SOURCE_ADDRESSES = 10_000;

/** A count of failed authentications kept for every replica (a shared book's). */
export type SharedFailureCount = (address: string, limits: BucketLimits) => Promise<number>;

export class SourceLimiter {
  /** address -> bucket, least recently failing first. */
  private readonly buckets = new Map<string, Bucket>();
  /** address -> until when the shared count keeps it out (its last answer), least recently told first. */
  private readonly sharedUntil = new Map<string, number>();
  private shared: SharedFailureCount | undefined;
  /** The shared count's answers still awaited (tests wait for them). */
  private readonly asking = new Set<Promise<void>>();

  constructor(
    private readonly limits: BucketLimits = DEFAULT_FAILED_AUTH_LIMITS,
    private readonly now: () => number = Date.now,
    private readonly maxAddresses = MAX_SOURCE_ADDRESSES,
  ) {
    checkLimits(limits);
  }

  /** Counts every failure from here on in `count` too (one count for every replica). */
  share(count: SharedFailureCount): void {
    this.shared = count;
  }

  /** Milliseconds until the address may fail again; undefined when it may now. Takes nothing. */
  blocked(address: string): number | undefined {
    const until = this.sharedUntil.get(address);
    if (until !== undefined) {
      const wait = until - this.now();
      if (wait > 0) return wait;
      this.sharedUntil.delete(address);
    }
    const bucket = this.buckets.get(address);
    if (bucket === undefined) return undefined;
    const probe = take(bucket, this.now(), this.limits);
    return probe.allowed ? undefined : probe.retryAfterMs;
  }

  /** One failed authentication from the address. */
  failed(address: string): void {
    const result = take(this.buckets.get(address), this.now(), this.limits);
    remember(this.buckets, address, result.bucket, this.maxAddresses);
    if (this.shared === undefined) return;
    const asked: Promise<void> = this.shared(address, this.limits).then(
      (waitMs) => {
        if (waitMs > 0) remember(this.sharedUntil, address, this.now() + waitMs, this.maxAddresses);
      },
      // The book unreachable: this process's own count above still limits the address.
      () => {},
    );
    this.asking.add(asked);
    void asked.finally(() => this.asking.delete(asked));
  }

  /** Resolves once every failure counted so far has the shared count's answer. */
  async settled(): Promise<void> {
    await Promise.all([...this.asking]);
  }
}

/** Sets `key` as the most recent entry, forgetting the oldest beyond `max`. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}

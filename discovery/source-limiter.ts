// Requests without a valid token are limited per source address, and the check comes before
// any hashing (issue 48 item 5): a client that keeps failing authentication is answered 429
// from a map lookup, so it cannot spend the event loop the probes share on SHA-256. Only
// failures take from an address's bucket: a valid client behind the same address is never
// slowed by this limiter while its own requests authenticate.
import { take, checkLimits, type Bucket, type BucketLimits } from './token-bucket.js';

export const DEFAULT_FAILED_AUTH_LIMITS: BucketLimits = Object.freeze({ ratePerSecond: 5, burst: 20 });
/** Addresses remembered; beyond it the least recently failing is forgotten (a full bucket again). */
export const MAX_SOURCE_ADDRESSES = 10_000;

export class SourceLimiter {
  /** address -> bucket, least recently failing first. */
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limits: BucketLimits = DEFAULT_FAILED_AUTH_LIMITS,
    private readonly now: () => number = Date.now,
    private readonly maxAddresses = MAX_SOURCE_ADDRESSES,
  ) {
    checkLimits(limits);
  }

  /** Milliseconds until the address may fail again; undefined when it may now. Takes nothing. */
  blocked(address: string): number | undefined {
    const bucket = this.buckets.get(address);
    if (bucket === undefined) return undefined;
    const probe = take(bucket, this.now(), this.limits);
    return probe.allowed ? undefined : probe.retryAfterMs;
  }

  /** One failed authentication from the address. */
  failed(address: string): void {
    const result = take(this.buckets.get(address), this.now(), this.limits);
    this.buckets.delete(address);
    if (this.buckets.size >= this.maxAddresses) this.buckets.delete(this.buckets.keys().next().value!);
    this.buckets.set(address, result.bucket);
  }
}

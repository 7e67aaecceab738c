// Per-token rate limiting: a token bucket per API token name, refilled continuously. The
// bucket arithmetic is a pure function; RateLimiter only keeps one bucket per name.

export interface BucketLimits {
  /** Sustained requests per second. */
  ratePerSecond: number;
  /** Requests allowed at once after a quiet period (the bucket's size). */
  burst: number;
}

export interface Bucket {
  tokens: number;
  /** When `tokens` was last computed (ms). */
  at: number;
}

export type TakeResult =
  | { allowed: true; bucket: Bucket }
  /** `retryAfterMs`: until one whole token is back. */
  | { allowed: false; bucket: Bucket; retryAfterMs: number };

/** Takes `cost` tokens (default one) from `bucket` (undefined: a full one) at `now`. */
export function take(bucket: Bucket | undefined, now: number, limits: BucketLimits, cost = 1): TakeResult {
  const elapsed = bucket === undefined ? 0 : Math.max(0, now - bucket.at);
  const refilled =
    bucket === undefined
      ? limits.burst
      : Math.min(limits.burst, bucket.tokens + (elapsed / 1000) * limits.ratePerSecond);
  if (refilled >= cost) return { allowed: true, bucket: { tokens: refilled - cost, at: now } };
  return {
    allowed: false,
    bucket: { tokens: refilled, at: now },
    retryAfterMs: Math.ceil(((cost - refilled) / limits.ratePerSecond) * 1000),
  };
}

export function checkLimits(limits: BucketLimits): void {
  if (!(Number.isFinite(limits.ratePerSecond) && limits.ratePerSecond > 0))
    throw new Error(`ratePerSecond must be a positive number, got ${limits.ratePerSecond}`);
  if (!(Number.isInteger(limits.burst) && limits.burst >= 1))
    throw new Error(`burst must be an integer >= 1, got ${limits.burst}`);
}

/** One bucket per token name: as many as there are tokens (plus the anonymous one). */
export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limits: BucketLimits,
    private readonly now: () => number = Date.now,
  ) {
    checkLimits(limits);
  }

  /** undefined when allowed, else the milliseconds until the next request would be. */
  take(name: string, cost = 1): number | undefined {
    const result = take(this.buckets.get(name), this.now(), this.limits, cost);
    this.buckets.set(name, result.bucket);
    return result.allowed ? undefined : result.retryAfterMs;
  }
}

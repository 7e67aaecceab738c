/**
 * An overall rate limit shared by all keys: `qps` tokens per second, up to `burst` saved.
 * reserve() never blocks; it says how long the caller must wait for its token.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(qps > 0) || !(burst >= 1))
      throw new Error(`token bucket: need qps > 0 and burst >= 1, got ${qps}/${burst}`);
    this.tokens = burst;
    this.last = now();
  }

  /** Takes one token (possibly borrowed from the future) and returns the wait in ms. */
  reserve(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.qps);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.qps) * 1000);
  }
}

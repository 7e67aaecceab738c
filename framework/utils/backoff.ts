/** Exponential backoff per key: base * 2^failures, capped. Forgotten on success. */
export class ExponentialBackoff<K> {
  private readonly failures = new Map<K, number>();

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {
    if (!(baseMs > 0) || !(maxMs >= baseMs)) {
      throw new Error(`backoff: need 0 < baseMs <= maxMs, got baseMs=${baseMs} maxMs=${maxMs}`);
    }
  }

  /** Records one more failure of `key` and returns how long to wait before its retry. */
  next(key: K): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    // Cap the exponent too, so 2^n never overflows into Infinity for a long-failing key.
    return Math.min(this.maxMs, this.baseMs * 2 ** Math.min(n, 40));
  }

  retries(key: K): number {
    return this.failures.get(key) ?? 0;
  }

  forget(key: K): void {
    this.failures.delete(key);
  }

  /** The keys with a failure on record. */
  keys(): IterableIterator<K> {
    return this.failures.keys();
  }
}

import { ExponentialBackoff } from '../utils/backoff.js';
import { longTimeout, type LongTimeout } from '../utils/sleep.js';
import { TokenBucket } from '../utils/token-bucket.js';

export interface QueueOptions {
  /** First retry delay after a failure, doubled per consecutive failure (default 1000). */
  backoffBaseMs?: number;
  /** Cap of the per-key retry delay (default 300000 = 5 min). */
  backoffMaxMs?: number;
  /** Overall retry rate limit shared by all keys (default 10/s, burst 100). */
  qps?: number;
  burst?: number;
}

/**
 * A work queue keyed by object, after client-go's: a key is queued at most once (dirty set),
 * never handed to two workers at once (a key re-added while processing is re-queued when the
 * worker calls done()), failures back off per key, and retries share a token bucket.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly delayed = new Map<string, { at: number; timer: LongTimeout }>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private readonly backoff: ExponentialBackoff<string>;
  private readonly bucket: TokenBucket;
  private closed = false;

  constructor(opts: QueueOptions = {}) {
    this.backoff = new ExponentialBackoff(opts.backoffBaseMs ?? 1000, opts.backoffMaxMs ?? 300_000);
    this.bucket = new TokenBucket(opts.qps ?? 10, opts.burst ?? 100);
  }

  get length(): number {
    return this.queue.length;
  }

  get shuttingDown(): boolean {
    return this.closed;
  }

  add(key: string): void {
    if (this.closed || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      this.dirty.delete(key);
      this.processing.add(key);
      waiter(key);
    } else this.queue.push(key);
  }

  /** Adds `key` after `ms`; an earlier pending delayed add for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.closed) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) pending.timer.cancel();
    const timer = longTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, timer });
  }

  /** Re-adds a failed key after its exponential backoff (and the overall rate limit). Returns the delay. */
  addRateLimited(key: string): number {
    const ms = Math.max(this.backoff.next(key), this.bucket.reserve());
    this.addAfter(key, ms);
    return ms;
  }

  /** Clears the failure count of `key` (call on success). */
  forget(key: string): void {
    this.backoff.forget(key);
  }

  /** Forgets everything about `key`: its failures and any pending delayed add (its object is gone). */
  drop(key: string): void {
    this.backoff.forget(key);
    const pending = this.delayed.get(key);
    if (pending) pending.timer.cancel();
    this.delayed.delete(key);
  }

  /** Keys the queue holds any per-key state for (failures, delayed adds): for the tracked-objects gauge. */
  trackedKeys(): string[] {
    return [...this.backoff.keys(), ...this.delayed.keys()];
  }

  retries(key: string): number {
    return this.backoff.retries(key);
  }

  /** The next key to process, or undefined once shut down. */
  get(): Promise<string | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key) && !this.closed) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  shutDown(): void {
    this.closed = true;
    for (const { timer } of this.delayed.values()) timer.cancel();
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  /** Runs `concurrency` workers until shutdown; resolves when the last in-flight item is done. */
  async run(concurrency: number, worker: (key: string) => Promise<void>): Promise<void> {
    const loop = async () => {
      for (let key = await this.get(); key !== undefined; key = await this.get()) {
        try {
          await worker(key);
        } finally {
          this.done(key);
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
  }
}

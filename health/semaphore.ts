// Counting semaphore bounding concurrent probes. Waiters are FIFO so no target starves, and
// a waiter can give up (target removed) without leaking a permit.
export class Semaphore {
  private available: number;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly permits: number) {
    if (!Number.isInteger(permits) || permits < 1) {
      throw new RangeError(`semaphore permits must be a positive integer, got ${permits}`);
    }
    this.available = permits;
  }

  get inUse(): number {
    return this.permits - this.available;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves true with a permit held, or false (no permit) if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.available > 0) {
      this.available--;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const grant = (): void => {
        signal.removeEventListener('abort', abandon);
        resolve(true);
      };
      const abandon = (): void => {
        const i = this.waiters.indexOf(grant);
        if (i >= 0) this.waiters.splice(i, 1);
        resolve(false);
      };
      this.waiters.push(grant);
      signal.addEventListener('abort', abandon, { once: true });
    });
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.available++;
  }
}

/** Where served mock instances start: clear of 127.0.0.1, which other local services use. */
export const FIRST_LOOPBACK = '127.0.0.10';

function isAddressInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE';
}

/**
 * Hands each served instance its own 127.x.y.z address (Linux routes all of 127/8 to lo), so
 * every mock proxy can listen on the port its Proxy asked for, like a real VM would.
 * An address already taken on that port (another mock provider, another test worker) is skipped.
 */
export class LoopbackAddresses {
  private next: number;

  constructor(first: string = FIRST_LOOPBACK) {
    const [a, b, c, d] = first.split('.').map(Number);
    if (a !== 127) throw new Error(`loopback addresses must be in 127.0.0.0/8, got ${first}`);
    this.next = (b << 16) | (c << 8) | d;
  }

  /** Calls `listen(host)` on successive addresses until one is free; gives up after `attempts`. */
  async bind<T>(listen: (host: string) => Promise<T>, attempts = 64): Promise<T> {
    let lastError: unknown;
    for (let i = 0; i < attempts; i++) {
      const host = this.take();
      try {
        return await listen(host);
      } catch (err) {
        if (!isAddressInUse(err)) throw err;
        lastError = err;
      }
    }
    throw new Error(`no free loopback address after ${attempts} attempts`, { cause: lastError });
  }

  private take(): string {
    const n = this.next;
    // Skip .0 and .255 host parts; wrap before 127.255.255.255.
    this.next = n + 1 >= 0xffffff ? 10 : n + 1;
    if ((n & 0xff) === 0 || (n & 0xff) === 0xff) return this.take();
    return `127.${(n >> 16) & 0xff}.${(n >> 8) & 0xff}.${n & 0xff}`;
  }
}

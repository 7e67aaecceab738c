// Reusable output buffers for list pages. A page of 200 proxies is ~40 KB of JSON; a fresh
// Buffer of that size per page is memory outside V8's heap that only a collection gives
// back, and at a thousand pages a second those allocations made V8 run mark-compacts
// (pauses of 10-40 ms on the event loop the health engine's probes share) and cost more CPU
// than building the page (docs/benchmarks.md, "Probe lateness while clients list"). A page
// is written into a buffer taken here and given back once its response is done with it.

/** Bytes of one pooled buffer: a default page (200 proxies) fits with room to spare. */
export const PAGE_BUFFER_BYTES = 128 * 1024;
/** Buffers kept for reuse; more than that in flight at once are allocated and dropped. */
export const MAX_FREE_PAGE_BUFFERS = 8;

export class PageBuffers {
  private readonly free: ArrayBuffer[] = [];
  /** Handed out and not given back yet; weak, so a page never given back is still collected. */
  private readonly lent = new WeakSet<ArrayBuffer>();

  constructor(
    readonly bufferBytes = PAGE_BUFFER_BYTES,
    readonly maxFree = MAX_FREE_PAGE_BUFFERS,
  ) {
    if (!Number.isInteger(bufferBytes) || bufferBytes < 1) {
      throw new Error(`bufferBytes must be a positive integer, got ${bufferBytes}`);
    }
    if (!Number.isInteger(maxFree) || maxFree < 0) {
      throw new Error(`maxFree must be a non-negative integer, got ${maxFree}`);
    }
  }

  /** Pooled buffers created so far (the rest of the pages reused one). */
  created = 0;

  /** Buffers waiting to be reused. */
  get size(): number {
    return this.free.length;
  }

  /**
   * A buffer of exactly `length` bytes, its content undefined. Up to `bufferBytes` it is a
   * view of a pooled buffer, which must be given back once nothing reads it any more (a
   * response's 'close'); a longer one is allocated for the caller alone.
   */
  take(length: number): Buffer {
    if (length > this.bufferBytes) return Buffer.allocUnsafeSlow(length);
    let backing = this.free.pop();
    if (backing === undefined) {
      backing = new ArrayBuffer(this.bufferBytes);
      this.created++;
    }
    this.lent.add(backing);
    return Buffer.from(backing, 0, length);
  }

  /**
   * Gives back a buffer `take` returned, for reuse. Anything else, and a buffer given back
   * already, is ignored: a buffer is never handed out twice at once.
   */
  give(bytes: Uint8Array): void {
    const backing = bytes.buffer;
    if (!(backing instanceof ArrayBuffer) || !this.lent.delete(backing)) return;
    if (this.free.length < this.maxFree) this.free.push(backing);
  }
}

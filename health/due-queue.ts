import type { Clock } from './clock.js';
import { MinHeap } from './min-heap.js';

interface Entry {
  dueAt: number;
  key: string;
  generation: number;
}

/**
 * Keys due at points in time, driven by ONE timer armed for the earliest due time (instead
 * of a timer per proxy). Rescheduling or cancelling a key bumps its generation; stale heap
 * entries are skipped when they surface, which keeps every operation O(log n).
 */
export class DueQueue {
  private readonly heap = new MinHeap<Entry>((a, b) => a.dueAt < b.dueAt);
  /** The live entry per key; a heap entry that is not this object is stale. */
  private readonly live = new Map<string, Entry>();
  private generation = 0;
  private cancelTimer: (() => void) | undefined;
  private armedFor = Infinity;
  private running = false;

  /**
   * @param batchMillis keys due within this long after the one the timer fired for are handed
   *   out with it (early, with their planned time): a few probes started together share the
   *   event loop's turns, where one at a time each pays them alone.
   */
  constructor(
    private readonly clock: Clock,
    private readonly onDue: (key: string, plannedAt: number) => void,
    private readonly batchMillis = 0,
  ) {
    if (!(batchMillis >= 0)) throw new RangeError(`batchMillis must be >= 0, got ${batchMillis}`);
  }

  get size(): number {
    return this.live.size;
  }

  /** (Re)schedules `key`, replacing any earlier schedule of it. */
  schedule(key: string, dueAt: number): void {
    const entry = { dueAt, key, generation: ++this.generation };
    this.live.set(key, entry);
    this.heap.push(entry);
    this.arm();
  }

  cancel(key: string): void {
    this.live.delete(key);
  }

  /** The due time currently scheduled for `key`, if any. */
  dueAt(key: string): number | undefined {
    return this.live.get(key)?.dueAt;
  }

  start(): void {
    this.running = true;
    this.arm();
  }

  stop(): void {
    this.running = false;
    this.disarm();
  }

  clear(): void {
    this.disarm();
    this.heap.clear();
    this.live.clear();
  }

  private isLive(entry: Entry): boolean {
    return this.live.get(entry.key) === entry;
  }

  private disarm(): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.armedFor = Infinity;
  }

  private arm(): void {
    if (!this.running) return;
    let next = this.heap.peek();
    while (next && !this.isLive(next)) {
      this.heap.pop();
      next = this.heap.peek();
    }
    if (!next) {
      this.disarm();
      return;
    }
    if (this.cancelTimer && next.dueAt >= this.armedFor) return;
    this.disarm();
    this.armedFor = next.dueAt;
    this.cancelTimer = this.clock.setTimer(() => this.fire(), next.dueAt - this.clock.now());
  }

  private fire(): void {
    this.cancelTimer = undefined;
    this.armedFor = Infinity;
    const horizon = this.clock.now() + this.batchMillis;
    let top = this.heap.peek();
    while (this.running && top && (top.dueAt <= horizon || !this.isLive(top))) {
      this.heap.pop();
      if (this.isLive(top)) {
        this.live.delete(top.key);
        this.onDue(top.key, top.dueAt);
      }
      top = this.heap.peek();
    }
    this.arm();
  }
}

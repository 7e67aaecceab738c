import type { Clock } from '../../health/clock.js';

/** A clock that only moves when told to, so scheduling tests never wait or flake. */
export class FakeClock implements Clock {
  private current = 0;
  private timers: Array<{ at: number; fn: () => void; id: number }> = [];
  private nextId = 0;

  now(): number {
    return this.current;
  }

  get pendingTimers(): number {
    return this.timers.length;
  }

  setTimer(fn: () => void, delayMillis: number): () => void {
    const id = this.nextId++;
    this.timers.push({ at: this.current + Math.max(0, delayMillis), fn, id });
    return () => {
      this.timers = this.timers.filter((t) => t.id !== id);
    };
  }

  /** Moves time forward, firing due timers in order and letting promise callbacks run between them. */
  async advance(millis: number): Promise<void> {
    const end = this.current + millis;
    for (;;) {
      await flushMicrotasks();
      const next = [...this.timers].sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!next || next.at > end) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.current = next.at;
      next.fn();
    }
    this.current = end;
    await flushMicrotasks();
  }
}

export async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

// The times a pace remembers (its latest successes, its latest requests), as an immutable
// value that grows without a copy. A pace takes a new log on every request and every success;
// copying the array each time was most of the integration's per-request cost
// (`npm run bench:crawl-path`, docs/benchmarks.md): a proxy's log holds up to 256 times.

/**
 * Times, oldest first. `remember` returns a new log and leaves this one as it was: the new log
 * shares this one's buffer and appends in place when nothing was appended after this log's
 * last time (the usual case: each pace has one successor), and copies otherwise.
 */
export class TimeLog {
  static readonly empty = new TimeLog([], 0, 0);

  private constructor(
    private readonly buffer: number[],
    private readonly from: number,
    private readonly to: number,
  ) {}

  static of(times: readonly number[]): TimeLog {
    return new TimeLog([...times], 0, times.length);
  }

  get length(): number {
    return this.to - this.from;
  }

  /** Times its buffer holds, its own and those dropped from its head: at most about twice the cap. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** The times, oldest first, as a new array. */
  toArray(): number[] {
    return this.buffer.slice(this.from, this.to);
  }

  /** This log and `now`, without the times at or before `keepAfter`, and at most `cap` times. */
  remember(now: number, keepAfter: number, cap: number): TimeLog {
    // Never into a shared empty buffer (TimeLog.empty is every new pace's).
    if (this.to === this.from) return new TimeLog([now], 0, 1);
    let from = this.from;
    while (from < this.to && this.buffer[from]! <= keepAfter) from++;
    if (this.to - from >= cap) from = this.to - cap + 1;
    // The buffer's tail is ours, and what is dropped from its head is not yet most of it.
    if (this.buffer.length === this.to && from <= Math.max(cap, this.to - from)) {
      this.buffer.push(now);
      return new TimeLog(this.buffer, from, this.to + 1);
    }
    const kept = this.buffer.slice(from, this.to);
    kept.push(now);
    return new TimeLog(kept, 0, kept.length);
  }
}

/** Counters describing how well the scheduler keeps its plan; read by the benchmark. */
export interface SchedulingSnapshot {
  probesStarted: number;
  probesCompleted: number;
  transitionsEmitted: number;
  /** Recent samples of actual start minus planned start, in milliseconds. */
  latenessMillis: number[];
}

/** Fixed-size ring of lateness samples: bounded memory however long the engine runs. */
export class SchedulingStats {
  probesStarted = 0;
  probesCompleted = 0;
  transitionsEmitted = 0;
  private readonly samples: Float64Array;
  private next = 0;
  private filled = 0;

  constructor(capacity = 100_000) {
    this.samples = new Float64Array(capacity);
  }

  recordLateness(millis: number): void {
    this.samples[this.next] = millis;
    this.next = (this.next + 1) % this.samples.length;
    this.filled = Math.min(this.filled + 1, this.samples.length);
  }

  reset(): void {
    this.probesStarted = 0;
    this.probesCompleted = 0;
    this.transitionsEmitted = 0;
    this.next = 0;
    this.filled = 0;
  }

  snapshot(): SchedulingSnapshot {
    return {
      probesStarted: this.probesStarted,
      probesCompleted: this.probesCompleted,
      transitionsEmitted: this.transitionsEmitted,
      latenessMillis: Array.from(this.samples.subarray(0, this.filled)),
    };
  }
}

/** Nearest-rank percentile (p in 0..100); NaN for no samples. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

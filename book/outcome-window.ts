// Report counts over a sliding window, in fixed-size buckets: memory stays constant however
// many reports arrive, and counts fall out of the window as time passes without any timer.
import type { OutcomeCounts, ReportResult } from './lease-store.js';

/** Buckets per window: counts are exact to one bucket (a 900 s window moves in 60 s steps). */
export const WINDOW_BUCKETS = 15;

const KINDS: readonly ReportResult[] = ['ok', 'banned', 'rate_limited', 'unreachable'];

export class OutcomeWindow {
  /** The absolute bucket number each ring slot currently holds (-1 = empty). */
  private readonly slots = new Float64Array(WINDOW_BUCKETS).fill(-1);
  private readonly counts = new Uint32Array(WINDOW_BUCKETS * KINDS.length);

  constructor(private readonly bucketMillis: number) {}

  add(result: ReportResult, now: number): void {
    const bucket = Math.floor(now / this.bucketMillis);
    const slot = bucket % WINDOW_BUCKETS;
    if (this.slots[slot] !== bucket) {
      this.slots[slot] = bucket;
      this.counts.fill(0, slot * KINDS.length, (slot + 1) * KINDS.length);
    }
    this.counts[slot * KINDS.length + KINDS.indexOf(result)]++;
  }

  totals(now: number): OutcomeCounts {
    const totals = { ok: 0, banned: 0, rate_limited: 0, unreachable: 0 };
    const oldest = Math.floor(now / this.bucketMillis) - WINDOW_BUCKETS + 1;
    for (let slot = 0; slot < WINDOW_BUCKETS; slot++) {
      if (this.slots[slot] < oldest) continue;
      totals.ok += this.counts[slot * KINDS.length];
      totals.banned += this.counts[slot * KINDS.length + 1];
      totals.rate_limited += this.counts[slot * KINDS.length + 2];
      totals.unreachable += this.counts[slot * KINDS.length + 3];
    }
    return totals;
  }

  /** True when no report is left in the window (the owner may drop it). */
  isEmpty(now: number): boolean {
    const oldest = Math.floor(now / this.bucketMillis) - WINDOW_BUCKETS + 1;
    return this.slots.every((bucket) => bucket < oldest);
  }
}

/** Reports that say the proxy failed the target (an unreachable proxy is held out instead). */
export function failures(counts: OutcomeCounts): number {
  return counts.banned + counts.rate_limited;
}

// The memory store's outcome statistics: each proxy's window of reported outcomes, and its
// usage as the API shows it (load, window counts, hold).

import type { HoldReason, ProxyUsage, ReportResult } from './lease-store.js';
import { OutcomeWindow } from './outcome-window.js';

export class MemoryOutcomeStats {
  private readonly windows = new Map<string, OutcomeWindow>();
  private readonly idle: ProxyUsage;

  constructor(
    private readonly windowSeconds: number,
    private readonly bucketMillis: number,
  ) {
    this.idle = Object.freeze({
      activeLeases: 0,
      stats: Object.freeze({
        windowSeconds,
        ok: 0,
        banned: 0,
        rate_limited: 0,
        unreachable: 0,
      }),
    });
  }

  add(proxyID: string, result: ReportResult, now: number): void {
    let window = this.windows.get(proxyID);
    if (window === undefined) {
      window = new OutcomeWindow(this.bucketMillis);
      this.windows.set(proxyID, window);
    }
    window.add(result, now);
  }

  /** A proxy's usage from its load and hold, with its window's counts at now. */
  usage(proxyID: string, activeLeases: number, held: HoldReason | undefined, now: number): ProxyUsage {
    const window = this.windows.get(proxyID);
    // Most of a large fleet is idle at any moment: one shared answer, no allocation.
    if (activeLeases === 0 && window === undefined && held === undefined) return this.idle;
    const counts = window?.totals(now) ?? { ok: 0, banned: 0, rate_limited: 0, unreachable: 0 };
    return {
      activeLeases,
      stats: { windowSeconds: this.windowSeconds, ...counts },
      ...(held === undefined ? {} : { held }),
    };
  }

  /** Frees the windows with nothing left in them. */
  sweep(now: number): void {
    for (const [id, window] of this.windows) if (window.isEmpty(now)) this.windows.delete(id);
  }
}

import type { Prober } from '../../health/prober.js';
import { ProbeReason, type ProbeOutcome } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';

export interface PendingProbe {
  target: ProbeTarget;
  signal: AbortSignal;
  resolve(outcome: ProbeOutcome): void;
}

export const success = (durationMillis = 20): ProbeOutcome => ({
  success: true,
  reason: ProbeReason.ProbeSucceeded,
  message: 'status 204',
  durationMillis,
});

export const failure = (reason: ProbeReason = ProbeReason.TunnelFailed): ProbeOutcome => ({
  success: false,
  reason,
  message: 'proxy answered CONNECT with 502',
  durationMillis: 3,
});

/** A prober whose probes finish when the test says so (or at once, with `answer`). */
export class ControlledProber implements Prober {
  readonly pending: PendingProbe[] = [];
  readonly started: Array<{ key: string; at: number }> = [];
  readonly released: string[] = [];
  closed = false;
  maxConcurrent = 0;
  /** When set, every probe resolves immediately with this. */
  answer: ((target: ProbeTarget) => ProbeOutcome) | undefined;

  constructor(private readonly now: () => number) {}

  get inFlight(): number {
    return this.pending.length;
  }

  probe(target: ProbeTarget, signal: AbortSignal): Promise<ProbeOutcome> {
    this.started.push({ key: target.key, at: this.now() });
    if (this.answer) return Promise.resolve(this.answer(target));
    return new Promise((resolve) => {
      const entry: PendingProbe = {
        target,
        signal,
        resolve: (outcome) => {
          this.pending.splice(this.pending.indexOf(entry), 1);
          resolve(outcome);
        },
      };
      this.pending.push(entry);
      this.maxConcurrent = Math.max(this.maxConcurrent, this.pending.length);
      // Like the real prober: a cancelled probe settles promptly.
      signal.addEventListener('abort', () => entry.resolve(failure(ProbeReason.ProbeError)), { once: true });
    });
  }

  finishAll(outcome: ProbeOutcome): void {
    for (const p of [...this.pending]) p.resolve(outcome);
  }

  async release(key: string): Promise<void> {
    this.released.push(key);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

// What the API logs about reports, bounded whatever clients send. Each banned, rate_limited
// or unreachable report (and each session move) is a debug line; at info there is at most
// one summary line per interval, counts only: a client's targets and keys never reach the
// info log, and 20,000 reports are one line, not 20,000.
import type { Logger } from 'pino';

export const REPORT_SUMMARY_INTERVAL_MS = 60_000;

export type ReportLogEvent = 'cooldown' | 'capped' | 'suspect' | 'session_moved';

export type ReportCounts = Record<ReportLogEvent, number>;

const zero = (): ReportCounts => ({ cooldown: 0, capped: 0, suspect: 0, session_moved: 0 });

export class ReportLog {
  private counts = zero();
  private since: number;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = REPORT_SUMMARY_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.since = now();
  }

  /** Counts one event; `details` goes to the debug line only. */
  record(event: ReportLogEvent, details: Record<string, unknown>, message: string): void {
    this.logger.debug(details, message);
    this.counts[event]++;
    const now = this.now();
    // Emitted by the first event after the interval: no timer to stop, and quiet when idle.
    if (now - this.since < this.intervalMs) return;
    this.logger.info(
      { ...this.counts, seconds: Math.round((now - this.since) / 1000) },
      'reports since the last summary (each is a debug line)',
    );
    this.counts = zero();
    this.since = now;
  }
}

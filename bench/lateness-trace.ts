// Where does a late probe timer's lateness come from? Recorded inside the process whose timers
// are measured (BENCH_PROBE_TRACE=1 in discovery-probes.ts): every garbage collection (start,
// duration, kind, from 'gc' performance entries), every spell of request work on the event
// loop (a request's synchronous handling, a list page from its catalog read to its res.end),
// and, at every timer, the main thread's CPU time and run-queue wait (/proc/thread-self/
// schedstat: time it wanted the CPU and the kernel gave it to another thread). For each
// late timer the window [due, fired] is then split into GC, page work, other request work,
// waiting for a CPU, and the rest (the loop's own work: HTTP parsing, socket writes, timers).
import { readFileSync } from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';

interface Span {
  start: number;
  end: number;
}

interface TimerSample {
  due: number;
  fired: number;
  /** Main thread's cumulative run-queue wait (ms) when the timer fired. */
  waitMs: number;
  /** Main thread's cumulative CPU time (ms) when the timer fired. */
  runMs: number;
}

export interface LateTimerShare {
  lateness: number;
  /** The largest share: 'major GC', 'scavenge', 'page', 'request', 'waiting for a CPU' or 'unattributed'. */
  cause: string;
  gc: number;
  page: number;
  request: number;
  runQueue: number;
  rest: number;
  /** The GC kinds overlapping the window. */
  gcKinds: string;
}

export interface TraceSummary {
  /** Timers whose lateness is at or above the cut (the worst 1 %). */
  cut: number;
  late: LateTimerShare[];
  /** Sums over the late timers' windows, ms. */
  totals: Omit<LateTimerShare, 'gcKinds' | 'cause'>;
  /** How many of the late timers each cause dominated. */
  causes: Record<string, number>;
  gcCount: number;
  gcMillis: number;
  gcMaxMillis: number;
  scavenges: number;
  pages: number;
  pageMillisP50: number;
  pageMillisP99: number;
  pageMillisMax: number;
  requestMillis: number;
  /** The main thread's run-queue wait over the whole measurement, ms, and its CPU time. */
  runQueueMillis: number;
  cpuMillis: number;
  seconds: number;
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

function schedstat(): { runMs: number; waitMs: number } {
  try {
    const [run, wait] = readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ');
    return { runMs: Number(run) / 1e6, waitMs: Number(wait) / 1e6 };
  } catch {
    return { runMs: Number.NaN, waitMs: Number.NaN };
  }
}

function overlap(spans: readonly Span[], from: number, to: number): number {
  let sum = 0;
  for (const s of spans) {
    if (s.end <= from || s.start >= to) continue;
    sum += Math.min(s.end, to) - Math.max(s.start, from);
  }
  return sum;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export class LatenessTrace {
  private gcs: (Span & { kind: string })[] = [];
  private pages: Span[] = [];
  private requests: Span[] = [];
  private timers: TimerSample[] = [];
  /** Run-queue samples (time, cumulative wait) taken at timers and at page ends. */
  private waits: { at: number; waitMs: number }[] = [];
  private openPage: number | undefined;
  private readonly observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind =
        ((e as unknown as { detail?: unknown }).detail as { kind?: number } | undefined)?.kind ?? -1;
      this.gcs.push({
        start: e.startTime,
        end: e.startTime + e.duration,
        kind: GC_KINDS[kind] ?? String(kind),
      });
    }
  });
  private from = 0;
  private startStat = { runMs: 0, waitMs: 0 };

  constructor() {
    this.observer.observe({ entryTypes: ['gc'] });
  }

  begin(): void {
    this.gcs = [];
    this.pages = [];
    this.requests = [];
    this.timers = [];
    this.waits = [];
    this.from = performance.now();
    this.startStat = schedstat();
  }

  pageStart(): void {
    this.openPage = performance.now();
  }

  /** Closes the page opened by pageStart, if any (called after every response's end). */
  pageEnd(): void {
    if (this.openPage === undefined) return;
    const end = performance.now();
    this.pages.push({ start: this.openPage, end });
    this.openPage = undefined;
    this.waits.push({ at: end, waitMs: schedstat().waitMs });
  }

  request(start: number): void {
    this.requests.push({ start, end: performance.now() });
  }

  timer(due: number): void {
    const fired = performance.now();
    const stat = schedstat();
    this.timers.push({ due, fired, ...stat });
    this.waits.push({ at: fired, waitMs: stat.waitMs });
  }

  /** Waits for the GC entries still queued in the observer, then summarizes. */
  async summary(): Promise<TraceSummary> {
    await new Promise((r) => setTimeout(r, 50));
    const seconds = (performance.now() - this.from) / 1000;
    const end = schedstat();
    const lateness = this.timers.map((t) => t.fired - t.due);
    const cut = percentile(lateness, 99);
    const late: LateTimerShare[] = [];
    for (let i = 0; i < this.timers.length; i++) {
      const t = this.timers[i];
      const length = t.fired - t.due;
      if (length < cut || length <= 0) continue;
      // The run-queue wait since the last sample taken before this timer was due (an upper
      // bound: that sample may be up to a page or a timer interval earlier than `due`).
      let before: number | undefined;
      for (let j = this.waits.length - 1; j >= 0; j--) {
        if (this.waits[j].at <= t.due) {
          before = this.waits[j].waitMs;
          break;
        }
      }
      const runQueue = Math.min(length, before === undefined ? 0 : t.waitMs - before);
      const gcSpans = this.gcs.filter((g) => g.end > t.due && g.start < t.fired);
      const major = overlap(
        gcSpans.filter((g) => g.kind !== 'minor'),
        t.due,
        t.fired,
      );
      const gc = overlap(gcSpans, t.due, t.fired);
      // Exclusive shares: a collection inside a page counts as GC, not as the page.
      const page = Math.max(
        0,
        overlap(this.pages, t.due, t.fired) -
          overlap(
            gcSpans.filter((g) => this.pages.some((p) => p.start <= g.start && g.end <= p.end)),
            t.due,
            t.fired,
          ),
      );
      const request = Math.max(
        0,
        overlap(this.requests, t.due, t.fired) - overlap(this.pages, t.due, t.fired),
      );
      const rest = Math.max(0, length - gc - page - request);
      const shares: [string, number][] = [
        ['major GC', major],
        ['scavenge', gc - major],
        ['page', page],
        ['request', request],
        ['waiting for a CPU', runQueue],
      ];
      const [cause, most] = shares.reduce((a, b) => (b[1] > a[1] ? b : a));
      late.push({
        lateness: length,
        cause: most >= length / 3 ? cause : 'unattributed',
        gc,
        page,
        request,
        runQueue,
        rest,
        gcKinds: [...new Set(gcSpans.map((g) => g.kind))].join('+') || '-',
      });
    }
    const causes: Record<string, number> = {};
    for (const l of late) causes[l.cause] = (causes[l.cause] ?? 0) + 1;
    const sum = (k: keyof Omit<LateTimerShare, 'gcKinds' | 'cause'>) => late.reduce((s, l) => s + l[k], 0);
    const pageMillis = this.pages.map((p) => p.end - p.start);
    return {
      cut,
      late: late.sort((a, b) => b.lateness - a.lateness),
      causes,
      totals: {
        lateness: sum('lateness'),
        gc: sum('gc'),
        page: sum('page'),
        request: sum('request'),
        runQueue: sum('runQueue'),
        rest: sum('rest'),
      },
      gcCount: this.gcs.length,
      gcMillis: this.gcs.reduce((s, g) => s + g.end - g.start, 0),
      gcMaxMillis: Math.max(0, ...this.gcs.map((g) => g.end - g.start)),
      scavenges: this.gcs.filter((g) => g.kind === 'minor').length,
      pages: this.pages.length,
      pageMillisP50: percentile(pageMillis, 50),
      pageMillisP99: percentile(pageMillis, 99),
      pageMillisMax: Math.max(0, ...pageMillis),
      requestMillis: this.requests.reduce((s, r) => s + r.end - r.start, 0),
      runQueueMillis: end.waitMs - this.startStat.waitMs,
      cpuMillis: end.runMs - this.startStat.runMs,
      seconds,
    };
  }
}

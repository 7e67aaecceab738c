// The parent's end of a side-by-side round (see crawl-side.ts): one side's crawl as a child
// process, pinned to one core when `taskset` is there, so both sides share that core and see
// the same machine at every moment.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ApiCalls, CrawlFigures, FaultPlan } from './crawl-scenario.js';

/** Lines on a side's stdout that start with this are messages (SideMessage, JSON). */
export const SIDE_PREFIX = '@@side ';

export interface SideConfig {
  pages: number;
  proxies: number;
  /** The fleet's first loopback address. */
  first: string;
  faults: FaultPlan;
  rateLimitPerSecond?: number;
  trace: boolean;
  /** CPU-profile the crawl (the integration's share), and write the profile into `profileDir` if set. */
  profile: boolean;
  profileDir?: string;
  /** The integration's okReportIntervalMs (default: its own). */
  okReportIntervalMs?: number;
  /** Run the fleet and site in a process of their own, pinned to this core (--world-apart). */
  worldCore?: number;
  /** Absent: Crawlee's own list (the baseline). */
  operator?: { discoveryURL: string; token: string; namespace: string };
  /** --api-calls-every-ms (an A/A run's first side): calls to the discovery API beside the crawl. */
  apiCalls?: ApiCalls;
}

export type SideMessage =
  { ready: { proxies: { host: string; port: number }[] } } | { figures: CrawlFigures } | { error: string };

const SIDE_ENTRY = fileURLToPath(new URL('./crawl-side.js', import.meta.url));
export const TASKSET = '/usr/bin/taskset';

/** Whether sides can be pinned to one core here. */
export const canPin = existsSync(TASKSET);

export class SideProcess {
  /** The side's fleet is up: its proxies' addresses. */
  readonly ready: Promise<{ host: string; port: number }[]>;
  /** The side's figures, once its crawl is done. */
  readonly figures: Promise<CrawlFigures>;
  private readonly child: ChildProcess;

  constructor(config: SideConfig, options: { core?: number; progress: (message: string) => void }) {
    const node = [process.execPath, SIDE_ENTRY, JSON.stringify(config)];
    const [command, ...args] =
      options.core !== undefined && canPin ? [TASKSET, '-c', String(options.core), ...node] : node;
    this.child = spawn(command!, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    const ready = deferred<{ host: string; port: number }[]>();
    const figures = deferred<CrawlFigures>();
    const fail = (err: Error) => {
      ready.reject(err);
      figures.reject(err);
    };
    this.ready = ready.promise;
    this.figures = figures.promise;
    // Whichever of the two a caller is not awaiting yet must not surface as unhandled.
    this.ready.catch(() => undefined);
    this.figures.catch(() => undefined);
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      if (!line.startsWith(SIDE_PREFIX)) return options.progress(line);
      const message = JSON.parse(line.slice(SIDE_PREFIX.length)) as SideMessage;
      if ('ready' in message) ready.resolve(message.ready.proxies);
      else if ('figures' in message) figures.resolve(message.figures);
      else fail(new Error(`a crawl side failed: ${message.error}`));
    });
    this.child.once('close', (code, signal) =>
      fail(new Error(`a crawl side exited (${code ?? signal}) before its figures`)),
    );
  }

  /** Starts the crawl. */
  go(): void {
    this.child.stdin!.write('go\n');
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** A promise and its settling functions (settling it again does nothing). */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: Error) => void } {
  let resolve: (value: T) => void = () => {};
  let reject: (err: Error) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

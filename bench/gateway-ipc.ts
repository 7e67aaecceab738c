// bench:gateway's processes talk over the fork IPC channel: the bench (the client) asks a
// child for its CPU and memory, or to start; the child answers the same id.
import { execFileSync, fork, type ChildProcess } from 'node:child_process';

export interface Usage {
  /** process.cpuUsage(), microseconds. */
  cpu: { user: number; system: number };
  /** RSS after a full GC, bytes. */
  rss: number;
  /** The JS heap in use after that GC, bytes. */
  heapUsed: number;
  /** Memory outside the JS heap that V8 knows of (Buffers), bytes. */
  external: number;
}

type Handler = (arg: unknown) => unknown;

let nextID = 0;

/** Asks `child` to run `cmd`; resolves with its answer. */
export function ask<T>(child: ChildProcess, cmd: string, arg?: unknown): Promise<T> {
  const id = ++nextID;
  return new Promise((resolve, reject) => {
    const onMessage = (m: { id?: number; result?: unknown; error?: string }) => {
      if (m.id !== id) return;
      child.off('message', onMessage);
      if (m.error !== undefined) reject(new Error(`${cmd}: ${m.error}`));
      else resolve(m.result as T);
    };
    child.on('message', onMessage);
    child.send({ id, cmd, arg });
  });
}

type GC = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * After V8's memory-reducing collection (the one it runs near its heap limit): it also gives
 * back the young generation a burst of allocation grew (16 MiB+ of pages that hold nothing), so
 * the RSS is what the live tunnels need, not the high-water mark of opening them.
 */
export function usage(): Usage {
  (globalThis as { gc?: GC }).gc?.({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  const m = process.memoryUsage();
  return { cpu: process.cpuUsage(), rss: m.rss, heapUsed: m.heapUsed, external: m.external };
}

/** The child's side: answers `ask` with `handlers`; `usage` and `cpu` (no GC) are always there; exits when the bench goes. */
export function serve(handlers: Record<string, Handler>): void {
  const all: Record<string, Handler> = { usage, cpu: () => process.cpuUsage(), ...handlers };
  process.on('message', (m: { id: number; cmd: string; arg?: unknown }) => {
    void (async () => {
      try {
        const handler = all[m.cmd];
        if (handler === undefined) throw new Error(`no command ${m.cmd}`);
        process.send?.({ id: m.id, result: await handler(m.arg) });
      } catch (err) {
        process.send?.({ id: m.id, error: String(err) });
      }
    })();
  });
  process.on('disconnect', () => process.exit(0));
}

/** The descriptor limit (soft, hard) a child of this process gets. */
export function fileLimits(): { soft: number; hard: number } {
  const [soft, hard] = execFileSync('sh', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((x) => (x === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(x)));
  return { soft, hard };
}

/**
 * Forks `script` (a bench process of its own). With `raise`, lifts that child's soft
 * descriptor limit to the hard one (prlimit on its pid): idle tunnels need two sockets each in
 * the proxies. Only the child's limit changes, nothing global; raising the hard limit itself
 * needs CAP_SYS_RESOURCE, which the development VM's root does not have.
 */
export function forkBench(script: string, args: string[], raise = false): ChildProcess {
  const child = fork(script, args, { execArgv: process.execArgv });
  const { soft, hard } = fileLimits();
  if (raise && soft < hard && child.pid !== undefined) {
    try {
      execFileSync('prlimit', ['--pid', String(child.pid), `--nofile=${hard}:${hard}`]);
    } catch (err) {
      console.warn(`bench:gateway: could not raise ${args.join(' ')}'s descriptor limit: ${String(err)}`);
    }
  }
  return child;
}

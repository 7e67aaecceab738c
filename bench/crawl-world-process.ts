// The crawling process's end of a world apart (see crawl-world-server.ts): the fleet and site
// in a child process, pinned to a core of their own when `taskset` is there, driven as a
// CrawlWorld.
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { SiteHit } from './crawl-site.js';
import type { RunningWorld, WorldConfig } from './crawl-world.js';
import { canPin, TASKSET } from './crawl-side-process.js';

export type WorldRequest =
  | { id: number; ban: string[] }
  | { id: number; kill: number[] }
  | { id: number; record: true }
  | { id: number; cpu: true };

export type WorldMessage =
  | { ready: { urls: string[]; hosts: string[]; ports: number[]; start: string } }
  | { id: number; done: number }
  | { id: number; cpuMs: number }
  | { id: number; record: { hits: SiteHit[]; firstRefusal: [string, number][] } }
  | { error: string };

// Built, the server is a .js beside this file; run from source (the tests), the .ts.
const BUILT = fileURLToPath(new URL('./crawl-world-server.js', import.meta.url));
const ENTRY = existsSync(BUILT) ? BUILT : BUILT.replace(/\.js$/, '.ts');

export interface WorldProcess extends RunningWorld {
  cpuMs(): Promise<number>;
}

export interface WorldProcessOptions {
  /** Pin the world's process to this core (when taskset is there). */
  core?: number;
  /** Node's flags for the world's process (the tests: the hooks that run TypeScript). */
  nodeFlags?: string[];
}

/** Starts a world apart. */
export async function startWorldProcess(
  config: WorldConfig,
  options: WorldProcessOptions = {},
): Promise<WorldProcess> {
  const { core, nodeFlags = [] } = options;
  const pinned = core !== undefined && canPin;
  const child: ChildProcess = fork(ENTRY, [JSON.stringify(config)], {
    ...(pinned
      ? { execPath: TASKSET, execArgv: ['-c', String(core), process.execPath, ...nodeFlags] }
      : { execArgv: nodeFlags }),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pending = new Map<number, (message: WorldMessage) => void>();
  let failed: Error | undefined;
  const fail = (err: Error) => {
    failed ??= err;
    for (const settle of pending.values()) settle({ error: err.message });
    pending.clear();
  };
  child.once('exit', (code, signal) => fail(new Error(`the crawl's world exited (${code ?? signal})`)));
  const ready = await new Promise<Extract<WorldMessage, { ready: unknown }>['ready']>((resolve, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`the crawl's world exited (${code ?? signal}) before it was up`)),
    );
    child.on('message', (raw) => {
      const message = raw as WorldMessage;
      if ('ready' in message) resolve(message.ready);
      else if ('error' in message) reject(new Error(`the crawl's world failed: ${message.error}`));
      else if ('id' in message) {
        pending.get(message.id)?.(message);
        pending.delete(message.id);
      }
    });
  });
  let next = 0;
  const ask = (request: Omit<WorldRequest, 'id'>): Promise<WorldMessage> => {
    if (failed) return Promise.reject(failed);
    const id = next++;
    return new Promise((resolve, reject) => {
      pending.set(id, (message) =>
        'error' in message ? reject(new Error(message.error)) : resolve(message),
      );
      child.send({ ...request, id });
    });
  };
  const doneAt = (message: WorldMessage): number => {
    if (!('done' in message)) throw new Error(`the crawl's world answered ${JSON.stringify(message)}`);
    return message.done;
  };
  return {
    urls: ready.urls,
    hosts: ready.hosts,
    ports: ready.ports,
    start: ready.start,
    pages: config.pages,
    ...(config.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: config.rateLimitPerSecond }),
    ban: async (hosts) => void doneAt(await ask({ ban: hosts })),
    kill: async (indices) => doneAt(await ask({ kill: indices })),
    record: async () => {
      const message = await ask({ record: true });
      if (!('record' in message)) throw new Error(`the crawl's world answered ${JSON.stringify(message)}`);
      return { hits: message.record.hits, firstRefusal: new Map(message.record.firstRefusal) };
    },
    cpuMs: async () => {
      const message = await ask({ cpu: true });
      if (!('cpuMs' in message)) throw new Error(`the crawl's world answered ${JSON.stringify(message)}`);
      return message.cpuMs;
    },
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.disconnect();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

// A real redis-server for a test: Debian's package (installed by .ci/run when absent), on
// loopback, on a free port, with its own temporary directory and no persistence. It can be
// killed, paused and started again on the same port, as an outage rehearsal needs.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { openMonitor, type RedisMonitor } from './redis-monitor.js';

export const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** A client for the test's own checks (INFO, CONFIG RESETSTAT). */
  client(): Redis;
  /** A MONITOR stream of every command the server runs (its scripts' calls with source "lua"). */
  monitor(): Promise<RedisMonitor>;
  /** Kills the server (SIGKILL): connections drop, nothing is kept (no persistence). */
  kill(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open and nothing answers. */
  pause(): void;
  resume(): void;
  /** Starts it again on the same port, after kill(). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

function requireRedisServer(): void {
  const probe = spawnSync(REDIS_SERVER, ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      `${REDIS_SERVER} not found: the Redis lease store's tests need Debian's redis-server ` +
        '(apt-get install -y redis-server; .ci/run installs it when absent)',
    );
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export async function startRedisServer(extraConfig: string[] = []): Promise<RedisServer> {
  requireRedisServer();
  const dir = mkdtempSync(join(tmpdir(), 'redis-test-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const clients: Redis[] = [];

  const launch = async (): Promise<void> => {
    if (child !== undefined && child.exitCode === null) return;
    const args = [
      '--bind',
      '127.0.0.1',
      '--port',
      String(port),
      '--dir',
      dir,
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
      // A lease book wants no eviction: an evicted lease key is a lost lease.
      '--maxmemory-policy',
      'noeviction',
      ...extraConfig,
    ];
    // LC_ALL=C: Lua's string comparison follows the server's collation.
    const proc = spawn(REDIS_SERVER, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let output = '';
    proc.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    proc.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start within 10 s:\n${output}`)),
        10_000,
      );
      const check = () => {
        if (output.includes('Ready to accept connections')) {
          clearTimeout(timer);
          proc.stdout!.off('data', check);
          resolve();
        }
      };
      proc.stdout!.on('data', check);
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited (${code}) before it was ready:\n${output}`));
      });
    });
    proc.removeAllListeners('exit');
    child = proc;
  };

  const killChild = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGCONT');
    proc.kill('SIGKILL');
    await exited;
  };

  await launch();
  const url = `redis://127.0.0.1:${port}`;
  return {
    port,
    url,
    client() {
      const client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      clients.push(client);
      return client;
    },
    monitor: () => openMonitor(port),
    kill: killChild,
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
    start: launch,
    async stop() {
      for (const client of clients) client.disconnect();
      await killChild();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

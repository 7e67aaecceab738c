import { eventually } from '../../framework/testing/index.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort } from '../../framework/testing/control-plane.js';
import { KUBECONFIG_ENV } from './kube.js';

// The operator's entry point as a real process (cmd/operator.ts through the harness's
// TypeScript hooks), for tests of what a restart or a leader change looks like from outside.
const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * `--providers-config` for a process whose External Proxies are the tests' forward proxies on
 * loopback: the embedded default's mock provider, and loopback endpoints allowed explicitly.
 */
export const LOOPBACK_PROVIDERS_CONFIG = join(root, 'test/harness/loopback-providers.yaml');

export interface OperatorProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  /** The last 64 KiB of its stdout and stderr, for a failing test's message. */
  output(): string;
}

export function runOperator(args: string[], env: Record<string, string> = {}): OperatorProcess {
  const child = spawn(
    process.execPath,
    [
      '--no-warnings',
      '--import',
      join(root, 'test/harness/ts-hooks.ts'),
      join(root, 'cmd/operator.ts'),
      ...args,
    ],
    // The API is closed by default; these processes are reached without a token unless a test
    // gives one (a test of the closed default sets DISCOVERY_UNAUTHENTICATED to 'false'). The
    // gateway (a default component) takes a free loopback port: processes run side by side.
    {
      env: { ...process.env, DISCOVERY_UNAUTHENTICATED: 'true', GATEWAY_ADDRESS: '127.0.0.1:0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const keep = (b: Buffer) => (out = (out + b.toString()).slice(-65_536));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => out };
}

/** An operator process and the loopback ports of its /metrics (and probes) and discovery API. */
export interface ServingOperator {
  process: OperatorProcess;
  metricsPort: number;
  discoveryPort: number;
}

/**
 * The operator process on the shared test control plane, as one replica of a Deployment runs:
 * watching `namespace` and electing its leader there (or, with `leaderElection: false`, leading
 * alone), serving /metrics and the discovery API on loopback (free ports unless given). `flags`
 * follow those; `env` adds to its environment.
 */
export async function runOperatorIn(
  namespace: string,
  options: {
    flags?: string[];
    env?: Record<string, string>;
    leaderElection?: boolean;
    metricsPort?: number;
    discoveryPort?: number;
  } = {},
): Promise<ServingOperator> {
  const metricsPort = options.metricsPort ?? (await freePort());
  const discoveryPort = options.discoveryPort ?? (await freePort());
  // The suite's namespace is the process's own either way: its Lease and its credentials key Secret.
  const leader = [
    ...(options.leaderElection === false ? ['--leader-elect=false'] : []),
    '--leader-election-namespace',
    namespace,
  ];
  const process_ = runOperator(
    [
      '--kubeconfig',
      process.env[KUBECONFIG_ENV]!,
      '--watch-namespace',
      namespace,
      ...leader,
      '--metrics-address',
      `127.0.0.1:${metricsPort}`,
      '--discovery-address',
      `127.0.0.1:${discoveryPort}`,
      ...(options.flags ?? []),
    ],
    options.env,
  );
  return { process: process_, metricsPort, discoveryPort };
}

/** Waits until its /readyz answers 200; a timeout's error carries the process's output. */
export async function untilReady(op: ServingOperator, timeoutMs = 90_000): Promise<void> {
  await until('/readyz 200', () => readyz(op.metricsPort), timeoutMs).catch((err: Error) => {
    throw new Error(`${err.message}\n${op.process.output()}`);
  });
}

/** Polls until `check` returns a value (not undefined) or the deadline passes; a throw is a "not yet". */
export function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  return eventually(what, () => check().catch(() => undefined), { timeoutMs, intervalMs: 250 });
}

export async function readyz(metricsPort: number): Promise<true | undefined> {
  const res = await request(`http://127.0.0.1:${metricsPort}/readyz`);
  await res.body.dump();
  return res.statusCode === 200 ? true : undefined;
}

export async function scrape(metricsPort: number): Promise<string> {
  return (await request(`http://127.0.0.1:${metricsPort}/metrics`)).body.text();
}

/**
 * What a crawler sees: leases a proxy from every discovery port given, every 100 ms, and
 * releases it at once. Counts answers by outcome: `granted`, `409 <code>`, `unavailable` (no
 * connection: the process is down), or the status.
 */
export class LeasePoller {
  readonly counts = new Map<string, number>();
  private stopped = false;
  private loop?: Promise<void>;

  constructor(private readonly ports: () => number[]) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        await Promise.all(this.ports().map((port) => this.once(port)));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  count(outcome: string): number {
    return this.counts.get(outcome) ?? 0;
  }

  /** Every 409, whatever its code. */
  conflicts(): number {
    return [...this.counts].filter(([k]) => k.startsWith('409')).reduce((n, [, v]) => n + v, 0);
  }

  private add(outcome: string): void {
    this.counts.set(outcome, this.count(outcome) + 1);
  }

  private async once(port: number): Promise<void> {
    const base = `http://127.0.0.1:${port}/v1/leases`;
    try {
      const res = await request(base, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ttlSeconds: 30 }),
        headersTimeout: 5_000,
      });
      const body = (await res.body.json()) as { leaseID?: string; error?: string };
      if (res.statusCode === 201 && body.leaseID) {
        this.add('granted');
        await (await request(`${base}/${body.leaseID}`, { method: 'DELETE' })).body.dump();
      } else if (res.statusCode === 409) this.add(`409 ${body.error}`);
      else this.add(String(res.statusCode));
    } catch {
      this.add('unavailable');
    }
  }
}

// The built operator as a benchmark's child process (bench/crawl.ts, bench/memory.ts): started
// on a control plane with leader election off, its /readyz and /metrics, and what the kernel
// accounts it in /proc (CPU time, RSS).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const root = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The providers config a bench operator runs with unless its flags name one: the benchmarks'
 * External Proxies are forward proxies on loopback, which the operator refuses by default.
 */
export const LOOPBACK_PROVIDERS_CONFIG = join(root, 'bench/loopback-providers.yaml');

/** What `npm run build` makes of cmd/operator.ts. */
export const BUILT_OPERATOR = join(root, 'build/cmd/operator.js');

export interface BenchOperatorOptions {
  kubeconfig: string;
  metricsPort: number;
  discoveryPort: number;
  /** Flags after the kubeconfig, `--leader-elect=false` and the two addresses. */
  flags?: string[];
  /** Added to this process's environment. */
  env?: Record<string, string>;
  /** The operator's entry point (default BUILT_OPERATOR: another build's, to compare). */
  entry?: string;
  /** Read its stdout, as a container runtime does, and count its log bytes (else stdout is ignored). */
  countLogs?: boolean;
}

export class BenchOperator {
  readonly child: ChildProcess;
  readonly metricsPort: number;
  readonly discoveryPort: number;
  /** Bytes it wrote to stderr, and to stdout with `countLogs`. */
  logBytes = 0;
  private readonly exited: Promise<void>;

  constructor(options: BenchOperatorOptions) {
    this.metricsPort = options.metricsPort;
    this.discoveryPort = options.discoveryPort;
    this.child = spawn(
      process.execPath,
      [
        options.entry ?? BUILT_OPERATOR,
        `--kubeconfig=${options.kubeconfig}`,
        '--leader-elect=false',
        `--metrics-address=127.0.0.1:${options.metricsPort}`,
        `--discovery-address=127.0.0.1:${options.discoveryPort}`,
        // Not for another build (bench:memory's --operator): one older than the refusal reads no
        // `external:` key, and needs none.
        ...((options.entry ?? BUILT_OPERATOR) !== BUILT_OPERATOR ||
        options.flags?.some((f) => f.startsWith('--providers-config'))
          ? []
          : [`--providers-config=${LOOPBACK_PROVIDERS_CONFIG}`]),
        ...(options.flags ?? []),
      ],
      {
        // The gateway component is on by default, at 0.0.0.0:8888: on loopback, on a free port,
        // unless a flag or options.env says otherwise (two runs at once collided on 8888).
        env: { ...process.env, GATEWAY_ADDRESS: '127.0.0.1:0', ...options.env },
        stdio: ['ignore', options.countLogs ? 'pipe' : 'ignore', 'pipe'],
      },
    );
    let tail = '';
    this.child.stdout?.on('data', (b: Buffer) => (this.logBytes += b.length));
    this.child.stderr!.on('data', (b: Buffer) => {
      this.logBytes += b.length;
      tail = (tail + b.toString()).slice(-4096);
    });
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code, signal) => {
        if (code !== 0 && signal !== 'SIGTERM' && code !== null)
          process.stderr.write(`operator exited with ${code}: ${tail}\n`);
        resolve();
      }),
    );
  }

  /** Resolves once /readyz answers 200; throws after a minute or when the process has exited. */
  async ready(): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await request(`http://127.0.0.1:${this.metricsPort}/readyz`)
        .then(async (r) => (await r.body.dump(), r.statusCode === 200))
        .catch(() => false);
      if (ok) return;
      if (Date.now() > deadline || this.child.exitCode !== null)
        throw new Error('operator never became ready');
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Its /metrics, as text. */
  async metrics(): Promise<string> {
    return (await request(`http://127.0.0.1:${this.metricsPort}/metrics`)).body.text();
  }

  /** One series' value from /metrics (the sum over its label sets matching `labels`). */
  async metric(name: string, labels = ''): Promise<number> {
    const text = await this.metrics();
    let sum = 0;
    for (const m of text.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? ([0-9.e+-]+)$`, 'gm'))) {
      if ((m[1] ?? '').includes(labels)) sum += Number(m[2]);
    }
    return sum;
  }

  /** User + system CPU seconds so far. */
  cpuSeconds(): number {
    const fields = readFileSync(`/proc/${this.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  }

  /** Its RSS now (VmRSS) and the highest the kernel saw in its life (VmHWM), or undefined once it is gone. */
  memory(): { rssMiB: number; hwmMiB: number } | undefined {
    if (this.child.pid === undefined) return undefined;
    try {
      const text = readFileSync(`/proc/${this.child.pid}/status`, 'utf8');
      const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
      return { rssMiB: kb('VmRSS') / 1024, hwmMiB: kb('VmHWM') / 1024 };
    } catch {
      return undefined;
    }
  }

  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    await this.exited;
  }
}

// Benchmark: the operator's memory (RSS) with N External proxies probed every 10 s, beside a
// baseline measured in the same run: the same operator binary, settings and environment
// with no proxies at all.
//
//   npm run bench:memory                                  # 1000 proxies, 120 s steady, 60 s cold start
//   npm run bench:memory -- --proxies=200 --seconds=60 --restart-seconds=0
//   flags: --proxies=N --seconds=S (steady window) --interval=S (probe interval) --baseline-seconds=S
//          --restart-seconds=S (0 skips the cold start) --listeners=N (proxy listeners; proxies share them)
//          --node-options="..." (replaces the Deployment's NODE_OPTIONS for the operator, to compare)
//          --no-runtime-env (runs the operator without the Deployment's env: NODE_OPTIONS, MALLOC_ARENA_MAX)
//          --operator=path/to/build/cmd/operator.js (another build, e.g. an older commit's)
//
// Real parts only: a real etcd + kube-apiserver (framework/testing), the real operator
// (build/cmd/operator.js) as a child process with the Deployment's runtime environment, real
// forward proxies and an HTTPS target in another child process (so neither the fleet nor this
// script share the operator's heap). RSS comes from /proc/<pid>/status (VmRSS, and VmHWM for
// the peak the kernel saw between samples); the heap breakdown from the operator's /metrics.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { loadAverages } from './bench-env.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ControlPlane, freePort } from '../framework/control-plane/index.js';
import { selfSignedCert } from '../framework/testing/self-signed-cert.js';
import { applyCRDs } from '../cmd/demo/environment.js';
import { startFleet, type FleetReady } from './proxy-fleet.js';
import { BUILT_OPERATOR, BenchOperator, type BenchOperatorOptions } from './operator-process.js';
import { OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';
import { GROUP, PLURAL, VERSION, type Proxy } from '../crds/proxy-types.js';
import { createProxy } from './bench-proxies.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const NAMESPACE = 'bench-memory';
const MiB = 1024 * 1024;

interface Settings {
  proxies: number;
  seconds: number;
  intervalSeconds: number;
  baselineSeconds: number;
  restartSeconds: number;
  listeners: number;
  /** The Deployment's runtime env, or none (--no-runtime-env); NODE_OPTIONS as given. */
  runtimeEnv: Record<string, string>;
  operator: string;
}

function flag(name: string): string | undefined {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg?.slice(name.length + 3);
}

function number(name: string, fallback: number, min = 1): number {
  const raw = flag(name);
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min)
    throw new Error(`--${name} must be a number >= ${min}, got ${raw}`);
  return value;
}

function settings(): Settings {
  const proxies = Math.round(number('proxies', 1000));
  return {
    proxies,
    seconds: number('seconds', 120),
    intervalSeconds: number('interval', 10),
    baselineSeconds: number('baseline-seconds', 30),
    restartSeconds: number('restart-seconds', 60, 0),
    listeners: Math.round(number('listeners', Math.min(proxies, 250))),
    runtimeEnv: runtimeEnv(),
    operator: flag('operator') ?? BUILT_OPERATOR,
  };
}

function runtimeEnv(): Record<string, string> {
  const env: Record<string, string> = process.argv.includes('--no-runtime-env')
    ? {}
    : { ...OPERATOR_RUNTIME_ENV };
  const nodeOptions = flag('node-options');
  if (nodeOptions !== undefined) env.NODE_OPTIONS = nodeOptions;
  return env;
}

// ---------------------------------------------------------------- the operator and its memory

interface Sample {
  at: number;
  rssMiB: number;
  hwmMiB: number;
}

interface HeapBreakdown {
  heapUsedMiB: number;
  heapTotalMiB: number;
  externalMiB: number;
  rssMiB: number;
}

/** The operator under measurement, its RSS sampled from /proc every 500 ms. */
class OperatorUnderTest extends BenchOperator {
  readonly samples: Sample[] = [];
  private readonly sampler: NodeJS.Timeout;

  constructor(options: BenchOperatorOptions) {
    super({ ...options, countLogs: true });
    this.sampler = setInterval(() => this.sample(), 500);
  }

  sample(): Sample | undefined {
    const status = this.memory();
    if (!status) return undefined;
    const s = { at: Date.now(), ...status };
    this.samples.push(s);
    return s;
  }

  async heap(): Promise<HeapBreakdown> {
    const text = await this.metrics();
    const value = (name: string) => {
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)`, 'm').exec(text);
      return m ? Number(m[1]) / MiB : Number.NaN;
    };
    return {
      heapUsedMiB: value('nodejs_heap_size_used_bytes'),
      heapTotalMiB: value('nodejs_heap_size_total_bytes'),
      externalMiB: value('nodejs_external_memory_bytes'),
      rssMiB: value('process_resident_memory_bytes'),
    };
  }

  override async stop(): Promise<void> {
    clearInterval(this.sampler);
    await super.stop();
  }
}

interface Window {
  name: string;
  seconds: number;
  /** Highest RSS the kernel saw in the process's life so far (VmHWM only grows). */
  peakMiB: number;
  medianMiB: number;
  maxMiB: number;
  minMiB: number;
  heap?: HeapBreakdown;
}

function window(name: string, op: OperatorUnderTest, from: number, to: number, heap?: HeapBreakdown): Window {
  const rss = op.samples
    .filter((s) => s.at >= from && s.at <= to)
    .map((s) => s.rssMiB)
    .sort((a, b) => a - b);
  const last = op.samples.at(-1);
  return {
    name,
    seconds: (to - from) / 1000,
    // VmHWM as of the last sample; a later sample's RSS may already be above it.
    peakMiB: Math.max(last?.hwmMiB ?? Number.NaN, rss.at(-1) ?? 0),
    medianMiB: rss[Math.floor(rss.length / 2)] ?? Number.NaN,
    maxMiB: rss.at(-1) ?? Number.NaN,
    minMiB: rss[0] ?? Number.NaN,
    heap,
  };
}

// ---------------------------------------------------------------- the Kubernetes side

async function createProxies(kc: KubeConfig, s: Settings, fleet: FleetReady): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  let next = 0;
  const worker = async () => {
    while (next < s.proxies) {
      const i = next++;
      await createProxy(api, NAMESPACE, `proxy-${String(i).padStart(5, '0')}`, {
        mode: 'External',
        endpoint: { host: '127.0.0.1', port: fleet.ports[i % fleet.ports.length] },
        attributes: { geo: ['us', 'de', 'jp', 'br'][i % 4] },
        healthCheck: {
          probeURL: fleet.probeURL,
          intervalSeconds: s.intervalSeconds,
          // The CRD wants the timeout below the interval.
          timeoutSeconds: Math.min(5, Math.max(1, Math.ceil(s.intervalSeconds) - 1)),
        },
      });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

async function readyCount(kc: KubeConfig): Promise<number> {
  const list = (await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: NAMESPACE,
    plural: PLURAL,
  })) as { items: Proxy[] };
  return list.items.filter((p) => p.status?.phase === 'Ready').length;
}

// ---------------------------------------------------------------- main

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Issue 11's targets are in MB (10^6 bytes); the figures are MiB. */
const met = (mib: number, bytes: number) => (mib * MiB <= bytes ? 'met' : 'NOT met');
const mb = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? 'n/a' : v.toFixed(1));

/** Runs `seconds`, printing the operator's RSS every 10 s. */
async function watch(label: string, op: OperatorUnderTest, seconds: number, extra = () => ''): Promise<void> {
  const started = Date.now();
  while (Date.now() - started < seconds * 1000) {
    await sleep(Math.min(10_000, seconds * 1000 - (Date.now() - started)));
    const s = op.samples.at(-1);
    process.stdout.write(
      `  [${label}] ${((Date.now() - started) / 1000).toFixed(0)}s/${seconds}s rss=${mb(s?.rssMiB)} MiB peak=${mb(s?.hwmMiB)} MiB${extra()}\n`,
    );
  }
}

async function main(): Promise<void> {
  const s = settings();
  console.log(
    `memory benchmark: node ${process.version}, ${s.proxies} External proxies on ${s.listeners} loopback listeners, ` +
      `https probes every ${s.intervalSeconds}s; operator ${s.operator} with env ${JSON.stringify(s.runtimeEnv)}; ` +
      `load average before: ${loadAverages()}`,
  );
  const cleanups: Array<() => Promise<unknown>> = [];
  try {
    const cp = await ControlPlane.start({ progress: (m) => console.log(`  ${m}`) });
    cleanups.push(() => cp.stop());
    const kc = cp.kubeConfig();
    await applyCRDs(kc, join(root, 'dist', 'crds.yaml'));
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    // The CRD needs a moment to serve after the apply.
    await sleep(2000);

    const cert = selfSignedCert();
    const dir = await mkdtemp(join(tmpdir(), 'bench-memory-'));
    const caFile = join(dir, 'ca.pem');
    await writeFile(caFile, cert.cert);
    console.log(`starting ${s.listeners} forward proxies and an HTTPS target in a child process ...`);
    const { child: fleetChild, fleet } = await startFleet({ cert, count: s.listeners });
    cleanups.push(async () => fleetChild.disconnect());

    const launch = async (): Promise<OperatorUnderTest> => {
      const op = new OperatorUnderTest({
        kubeconfig: cp.kubeconfigPath,
        metricsPort: await freePort(),
        discoveryPort: await freePort(),
        flags: [`--watch-namespace=${NAMESPACE}`],
        // A token as the Deployment has (the API is closed by default); an env var, so an older
        // build given by --operator takes it too.
        env: { ...s.runtimeEnv, PROBE_CA_FILE: caFile, DISCOVERY_TOKEN: 'bench-memory-token-0123456789' },
        entry: s.operator,
      });
      cleanups.push(() => op.stop());
      await op.ready();
      return op;
    };

    // 1. Baseline: the same operator, no proxies.
    console.log(`baseline: the operator with no proxies (${s.baselineSeconds}s) ...`);
    const op = await launch();
    const t0 = Date.now();
    await watch('baseline', op, s.baselineSeconds);
    const baseline = window(
      'baseline (0 proxies)',
      op,
      t0 + (s.baselineSeconds * 1000) / 2,
      Date.now(),
      await op.heap(),
    );

    // 2. Ramp-up: the proxies are created while the operator runs, until all are Ready.
    console.log(`ramp-up: creating ${s.proxies} proxies ...`);
    const t1 = Date.now();
    let ready = 0;
    await createProxies(kc, s, fleet);
    console.log(`  created in ${((Date.now() - t1) / 1000).toFixed(0)}s; waiting until all are Ready ...`);
    const rampDeadline = Date.now() + Math.max(120, 6 * s.intervalSeconds) * 1000;
    while (ready < s.proxies && Date.now() < rampDeadline) {
      await sleep(5000);
      ready = await readyCount(kc).catch(() => ready);
      const last = op.samples.at(-1);
      process.stdout.write(
        `  [ramp-up] ${((Date.now() - t1) / 1000).toFixed(0)}s ready=${ready}/${s.proxies} rss=${mb(last?.rssMiB)} MiB peak=${mb(last?.hwmMiB)} MiB\n`,
      );
    }
    // The first full probe round after Ready still belongs to the ramp.
    await watch('ramp-up', op, 2 * s.intervalSeconds);
    const ramp = window(`ramp-up (${ready}/${s.proxies} Ready)`, op, t1, Date.now(), await op.heap());

    // 3. Steady state: the same process, probing.
    console.log(`steady state (${s.seconds}s) ...`);
    const t2 = Date.now();
    await watch('steady', op, s.seconds, () => `, load ${loadAverages()}`);
    const steady = window('steady', op, t2, Date.now(), await op.heap());
    const logs = op.logBytes;
    await op.stop();

    // 4. Cold start: a new process finds all the proxies at once (a restart, a new leader).
    const windows = [baseline, ramp, steady];
    if (s.restartSeconds > 0) {
      console.log(`cold start with ${s.proxies} proxies (${s.restartSeconds}s) ...`);
      const again = await launch();
      const t3 = Date.now();
      await watch('cold start', again, s.restartSeconds);
      windows.push(window('cold start', again, t3, Date.now(), await again.heap()));
      await again.stop();
    }

    console.log(
      `\nmemory benchmark: ${s.proxies} External proxies, https probes every ${s.intervalSeconds}s; ` +
        `load average after: ${loadAverages()}; operator wrote ${(logs / 1024).toFixed(0)} KiB of logs\n`,
    );
    console.log(
      '| window | seconds | RSS peak (VmHWM) MiB | RSS median MiB | RSS max MiB | heap used / total MiB | external MiB |',
    );
    console.log('|---|---|---|---|---|---|---|');
    for (const w of windows)
      console.log(
        `| ${w.name} | ${w.seconds.toFixed(0)} | ${mb(w.peakMiB)} | ${mb(w.medianMiB)} | ${mb(w.maxMiB)} | ` +
          `${mb(w.heap?.heapUsedMiB)} / ${mb(w.heap?.heapTotalMiB)} | ${mb(w.heap?.externalMiB)} |`,
      );
    const peak = Math.max(...windows.slice(1).map((w) => w.peakMiB));
    const perProxy = (v: number) => (((v - baseline.medianMiB) * 1024) / s.proxies).toFixed(0);
    console.log(`\n| figure | MiB | vs baseline | KiB per proxy over baseline | target (issue 11) |`);
    console.log('|---|---|---|---|---|');
    console.log(`| baseline steady (median) | ${mb(baseline.medianMiB)} | 1.00 | — | — |`);
    console.log(
      `| steady with ${s.proxies} proxies (max) | ${mb(steady.maxMiB)} | ${(steady.maxMiB / baseline.medianMiB).toFixed(2)} | ` +
        `${perProxy(steady.maxMiB)} | ≤ 200 MB (${(200e6 / MiB).toFixed(1)} MiB): ${met(steady.maxMiB, 200e6)} |`,
    );
    console.log(
      `| peak with ${s.proxies} proxies (VmHWM) | ${mb(peak)} | ${(peak / baseline.medianMiB).toFixed(2)} | ` +
        `${perProxy(peak)} | ≤ 256 MB (${(256e6 / MiB).toFixed(1)} MiB): ${met(peak, 256e6)} |`,
    );
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  }
}

// Exits explicitly: the kube client's keep-alive sockets would hold the process open.
main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);

// Benchmark: the health engine probing N proxies on loopback, beside a naive baseline (one
// setInterval + ProxyAgent per proxy) measured in the same run.
//
//   npm run build && node build/bench/health.js [--seconds=120] [--proxies=1000] [--interval=10] [--baseline-first] [--baseline-stagger]
//   (or BENCH_SECONDS / BENCH_PROXIES / BENCH_INTERVAL / BENCH_ORDER=baseline-first / BENCH_BASELINE=stagger)
//
// The proxies and the HTTPS target live in a CHILD process so the CPU figures below are the
// prober's alone. A few proxies lose egress and regain it periodically, so transitions happen.
import { createSecureContext } from 'node:tls';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { selfSignedCert, type SelfSignedCert as Cert } from '../framework/testing/self-signed-cert.js';
import { pino } from 'pino';
import { startFleet, type FleetReady } from './proxy-fleet.js';
import { Registry } from 'prom-client';
import { ProxyAgent } from 'undici';
import { HealthEngine } from '../health/health-engine.js';
import type { Prober } from '../health/prober.js';
import { SocketProber } from '../health/socket-prober.js';
import { percentile } from '../health/scheduling-stats.js';
import type { ProbeTarget } from '../health/probe-target.js';

interface Settings {
  seconds: number;
  proxies: number;
  intervalSeconds: number;
  flakyFraction: number;
  flapSeconds: number;
}

interface PhaseResult {
  name: string;
  cpuPercentOfOneCore: number;
  eventLoopDelayP99Millis: number;
  /** p99 under-samples a blocked loop (one sample per blockage), so bursts show up here. */
  eventLoopDelayMaxMillis: number;
  latenessP99Millis: number;
  probesPerSecond: number;
  statusWritesPerMinute: number;
  /** Status writes per minute not counting each proxy's first verdict (the startup burst). */
  steadyWritesPerMinute: number;
  cpuMillisPerProbe: number;
  successfulProbesPerSecond: number;
  cpuMillisPerSuccessfulProbe: number;
}

function setting(flag: string, env: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${flag}=`));
  const raw = arg ? arg.slice(flag.length + 3) : process.env[env];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`--${flag} / ${env} must be a positive number, got ${JSON.stringify(raw)}`);
  return value;
}

function settings(): Settings {
  return {
    seconds: setting('seconds', 'BENCH_SECONDS', 120),
    proxies: Math.round(setting('proxies', 'BENCH_PROXIES', 1000)),
    intervalSeconds: setting('interval', 'BENCH_INTERVAL', 10),
    flakyFraction: 0.02,
    flapSeconds: 60,
  };
}

// ---------------------------------------------------------------- parent: measuring

interface Counters {
  probes(): number;
  successes(): number;
  /** Shown in progress lines: how many proxies look fine right now. */
  fine(): string;
  statusWrites(): number;
  steadyWrites(): number;
  lateness(): number[];
}

async function measure(name: string, s: Settings, counters: Counters): Promise<PhaseResult> {
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const cpuStart = process.cpuUsage();
  const started = Date.now();
  const progress = setInterval(() => {
    const elapsed = (Date.now() - started) / 1000;
    process.stdout.write(
      `  [${name}] ${elapsed.toFixed(0)}s/${s.seconds}s probes=${counters.probes()} ${counters.fine()} status-writes=${counters.statusWrites()}\n`,
    );
  }, 10_000);
  await new Promise((resolve) => setTimeout(resolve, s.seconds * 1000));
  clearInterval(progress);
  loopDelay.disable();
  const cpu = process.cpuUsage(cpuStart);
  const wallSeconds = (Date.now() - started) / 1000;
  const probes = counters.probes();
  return {
    name,
    cpuPercentOfOneCore: ((cpu.user + cpu.system) / 1e6 / wallSeconds) * 100,
    eventLoopDelayP99Millis: loopDelay.percentile(99) / 1e6,
    eventLoopDelayMaxMillis: loopDelay.max / 1e6,
    latenessP99Millis: percentile(counters.lateness(), 99),
    probesPerSecond: probes / wallSeconds,
    statusWritesPerMinute: counters.statusWrites() / (wallSeconds / 60),
    steadyWritesPerMinute: counters.steadyWrites() / (wallSeconds / 60),
    cpuMillisPerProbe: probes === 0 ? Number.NaN : (cpu.user + cpu.system) / 1000 / probes,
    successfulProbesPerSecond: counters.successes() / wallSeconds,
    cpuMillisPerSuccessfulProbe:
      counters.successes() === 0 ? Number.NaN : (cpu.user + cpu.system) / 1000 / counters.successes(),
  };
}

async function engineRun(s: Settings, fleet: FleetReady, cert: Cert): Promise<PhaseResult> {
  // The engine's own prober, wrapped only to count successes for the report.
  const sockets = new SocketProber({ tls: { ca: cert.cert } });
  let successes = 0;
  const prober: Prober = {
    probe: async (target, cancel) => {
      const outcome = await sockets.probe(target, cancel);
      if (outcome.success) successes++;
      return outcome;
    },
    release: (key) => sockets.release(key),
    close: () => sockets.close(),
  };
  const engine = new HealthEngine({
    prober,
    // Transition logging is part of the real cost, so it stays on (into /dev/null).
    logger: pino({ level: 'info' }, pino.destination({ dest: '/dev/null', sync: false })),
    registry: new Registry(),
  });
  const targets: ProbeTarget[] = fleet.ports.map((port, i) => ({
    key: `bench/proxy-${i}`,
    host: '127.0.0.1',
    port,
    probeURL: fleet.probeURL,
    intervalSeconds: s.intervalSeconds,
    timeoutSeconds: 5,
    failureThreshold: 3,
    successThreshold: 1,
    expectedStatusCodes: [204, 200],
  }));
  const seen = new Set<string>();
  let steadyWrites = 0;
  engine.onTransition((key) => {
    if (seen.has(key)) steadyWrites++;
    else seen.add(key);
  });
  for (const t of targets) engine.upsert(t);
  engine.start();
  const result = await measure('engine', s, {
    probes: () => engine.stats().probesCompleted,
    successes: () => successes,
    fine: () => `healthy=${targets.filter((t) => engine.verdict(t.key)?.healthy).length}`,
    statusWrites: () => engine.stats().transitionsEmitted,
    steadyWrites: () => steadyWrites,
    lateness: () => engine.stats().latenessMillis,
  });
  const tls = sockets.tlsStats();
  console.log(
    `  [engine] TLS handshakes=${tls.handshakes} resumed=${tls.resumed} (${((tls.resumed / Math.max(1, tls.handshakes)) * 100).toFixed(1)}%) fallbacks=${tls.fallbacks}`,
  );
  await engine.stop();
  return result;
}

async function baselineRun(s: Settings, fleet: FleetReady, cert: Cert): Promise<PhaseResult> {
  let probes = 0;
  let successes = 0;
  const lateness: number[] = [];
  const agents: ProxyAgent[] = [];
  const timers: NodeJS.Timeout[] = [];
  const url = new URL(fleet.probeURL);
  // Same TLS set-up as the engine's prober, so the comparison is about scheduling alone.
  const secureContext = createSecureContext({ ca: cert.cert });
  const begin = Date.now();
  // --baseline-stagger spreads the loops' start over one interval: the same traffic shape as
  // the engine, to separate "cost of spreading" from "cost of the engine".
  const stagger = process.argv.includes('--baseline-stagger') || process.env.BENCH_BASELINE === 'stagger';
  const intervalMillis = s.intervalSeconds * 1000;
  for (const [i, port] of fleet.ports.entries()) {
    const agent = new ProxyAgent({
      uri: `http://127.0.0.1:${port}`,
      connections: 1,
      requestTls: { secureContext },
    });
    agents.push(agent);
    const offset = stagger ? (i / fleet.ports.length) * intervalMillis : 0;
    let tick = 0;
    const probe = async (): Promise<void> => {
      tick++;
      lateness.push(Date.now() - (begin + offset + tick * intervalMillis));
      try {
        const res = await agent.request({
          origin: url.origin,
          path: url.pathname,
          method: 'GET',
          signal: AbortSignal.timeout(5000),
          reset: true,
        });
        await res.body.dump();
        if (res.statusCode === 204) successes++;
      } catch {
        // counted as a probe, not a success
      }
      probes++;
    };
    // The naive loop: every proxy on its own setInterval, by default all started together.
    timers.push(setTimeout(() => timers.push(setInterval(probe, intervalMillis)), offset));
  }
  const result = await measure('baseline', s, {
    probes: () => probes,
    successes: () => successes,
    fine: () => `ok-probes=${successes}`,
    // A naive loop writes status after every probe.
    statusWrites: () => probes,
    steadyWrites: () => probes,
    lateness: () => lateness,
  });
  for (const t of timers) clearInterval(t);
  await Promise.all(agents.map((a) => a.destroy().catch(() => undefined)));
  return result;
}

function report(s: Settings, engine: PhaseResult, baseline: PhaseResult): void {
  const rows: Array<[string, Exclude<keyof PhaseResult, 'name'>]> = [
    ['CPU, % of one core', 'cpuPercentOfOneCore'],
    ['CPU ms per probe', 'cpuMillisPerProbe'],
    ['event-loop delay p99, ms', 'eventLoopDelayP99Millis'],
    ['event-loop delay max, ms', 'eventLoopDelayMaxMillis'],
    ['scheduling lateness p99, ms', 'latenessP99Millis'],
    ['probes per second', 'probesPerSecond'],
    ['successful probes per second', 'successfulProbesPerSecond'],
    ['CPU ms per successful probe', 'cpuMillisPerSuccessfulProbe'],
    ['status writes per minute', 'statusWritesPerMinute'],
    ['status writes per minute, first verdicts excluded', 'steadyWritesPerMinute'],
  ];
  const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
  console.log(
    `\nhealth benchmark: ${s.proxies} proxies, interval ${s.intervalSeconds}s, ${s.seconds}s per phase, ` +
      `${Math.round(s.proxies * s.flakyFraction)} proxies flapping every ${s.flapSeconds}s, https probe via CONNECT`,
  );
  console.log(`| metric | engine | baseline | engine/baseline |\n|---|---|---|---|`);
  for (const [label, key] of rows) {
    const e = engine[key];
    const b = baseline[key];
    console.log(`| ${label} | ${fmt(e)} | ${fmt(b)} | ${b === 0 ? 'n/a' : (e / b).toFixed(2)} |`);
  }
}

async function main(): Promise<void> {
  const s = settings();
  const cert = selfSignedCert();
  console.log(`starting ${s.proxies} loopback proxies and an HTTPS target in a child process ...`);
  const { child, fleet } = await startFleet({
    cert,
    count: s.proxies,
    flakyFraction: s.flakyFraction,
    flapSeconds: s.flapSeconds,
  });
  try {
    // Phase order is switchable to check that warm-up does not favour the second phase.
    const baselineFirst =
      process.argv.includes('--baseline-first') || process.env.BENCH_ORDER === 'baseline-first';
    const phases = [
      { name: 'engine', run: () => engineRun(s, fleet, cert) },
      { name: 'baseline', run: () => baselineRun(s, fleet, cert) },
    ];
    if (baselineFirst) phases.reverse();
    const results = new Map<string, PhaseResult>();
    for (const phase of phases) {
      console.log(`${phase.name} phase (${s.seconds}s) ...`);
      results.set(phase.name, await phase.run());
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
    const engine = results.get('engine')!;
    const baseline = results.get('baseline')!;
    report(s, engine, baseline);
  } finally {
    child.disconnect();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});

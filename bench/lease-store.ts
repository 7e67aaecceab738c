// Lease store benchmark (the second half of `npm run bench:discovery`): lease+release per
// second straight on the store, at 1,000 and 10,000 proxies, for the in-memory store, the
// Redis store from one process and from two processes at once (one book), beside the raw
// ceiling measured in the same run against the same redis-server with the same client
// library and concurrency: EVALSHA of a script that does nothing, and PING.
//
//   node build/bench/lease-store.js
//   BENCH_STORE_ROUNDS=5 BENCH_STORE_SLICE_SECONDS=2 BENCH_CONCURRENCY=32 node build/bench/lease-store.js
//
// Phases run in short slices, round-robin, so a change in the machine's load touches them
// alike; each figure is the median of its slices. redis-server runs on loopback with no
// persistence (the bench measures the book, not the disk). Beside each rate: the CPU that
// redis-server (INFO cpu) and this process spent per operation, which says where the time
// goes when the two share the machine's cores.
//
// The round-trip ratio: the Redis store's EVALSHA round trips per second (two per
// lease+release) over the raw ceiling's (EVALSHA of `return 1`), same connection, same
// concurrency, same redis-server, interleaved slices, medians.
//
// The refusal phases (issue 47 item 4): every proxy full (all_busy), or every proxy cooling
// down for the target (all_cooling_down), refused again and again, on each store; beside them
// the same refusals from a new owner each time, so that none is answered from the store's
// remembered refusal (refusal-memo.ts): a first refusal, which the Redis store answers from
// the fleet's counts (redis-scripts.ts: P:fleet, P:full, P:cdt), with a selector or a token
// scope, which it answers from the counts of the classes they match (proxy-classes.ts: the
// fleet's ten, geo x purpose, their ids and union's figures in the first script), and by exit
// IP (a block holding every proxy's address), which it answers from the exit-ordered sets
// (P:xip, P:xfull, P:xcd: one ZLEXCOUNT range each; the memory store's sorted sets too).
// Target: a refusal costs no more than a granted lease: Redis CPU per refusal ≤ per
// lease+release (Redis store); a lease+release's time ≤ a refusal's (memory store: the
// refusals/s at least the lease+release/s).
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { envPositiveNumber, loadAverages } from './bench-env.js';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { parseExitIPTerm } from '../book/exit-ip-match.js';
import { IndexedCatalog } from '../book/indexed-catalog.js';
import type { LeaseStore } from '../book/lease-store.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { connectRedis, whenReady } from '../book/redis-connection.js';
import { RedisLeaseStore } from '../book/redis-lease-store.js';
import { fleet } from './discovery-fleet.js';
import { startRedis } from './redis-process.js';

const ROUNDS = envPositiveNumber('BENCH_STORE_ROUNDS', 5);
const SLICE_SECONDS = envPositiveNumber('BENCH_STORE_SLICE_SECONDS', 1);
const CONCURRENCY = envPositiveNumber('BENCH_CONCURRENCY', 32);
const FLEETS = [envPositiveNumber('BENCH_SMALL_FLEET', 1000), envPositiveNumber('BENCH_LARGE_FLEET', 10_000)];
const logger = pino({ level: 'silent' });

/** Runs `op` from CONCURRENCY workers for `seconds`; returns completed ops per second. */
async function measure(op: () => Promise<void>, seconds: number): Promise<number> {
  return (await measureOps(op, seconds)).rate;
}

async function measureOps(
  op: () => Promise<void>,
  seconds: number,
  concurrency = CONCURRENCY,
): Promise<{ rate: number; ops: number }> {
  const end = performance.now() + seconds * 1000;
  let ops = 0;
  const worker = async () => {
    while (performance.now() < end) {
      await op();
      ops++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { rate: ops / ((performance.now() - started) / 1000), ops };
}

/** redis-server's CPU seconds so far (user + system). */
async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

interface Slice {
  rate: number;
  /** redis-server CPU µs per operation. */
  redisMicros: number;
  /** This process's CPU µs per operation (NaN for the two-process phase). */
  clientMicros: number;
}

function leaseRelease(store: LeaseStore): () => Promise<void> {
  return async () => {
    const result = await store.acquire({ selector: {}, ttlSeconds: 60 });
    if (!result.granted) throw new Error(`no lease: ${result.reason}`);
    await store.release(result.lease.id);
  };
}

function catalogOf(proxies: number, maxLeases?: number): IndexedCatalog {
  const catalog = new IndexedCatalog();
  catalog.replaceAll(
    // The refusing fleets (one slot each) egress from their own addresses: a request by exit IP counts them.
    maxLeases === undefined ? fleet(proxies) : fleet(proxies).map((p) => ({ ...p, maxLeases, exitIP: p.ip })),
  );
  return catalog;
}

const REFUSED_TARGET = 'refused.example';

/**
 * Every leasable proxy of a one-slot fleet full (`busy`), or banned for REFUSED_TARGET and
 * idle: leased (and banned) until the store refuses for that reason.
 */
async function refusing(store: LeaseStore, busy: boolean): Promise<void> {
  for (;;) {
    const result = await store.acquire({ selector: {}, ttlSeconds: 3600, target: REFUSED_TARGET });
    if (!result.granted) {
      if (result.reason === (busy ? 'all_busy' : 'all_cooling_down')) return;
      throw new Error(`setting up the refusals: ${result.reason}`);
    }
    if (!busy) await store.reportMany([{ leaseID: result.lease.id, result: 'banned', release: true }]);
  }
}

let walks = 0;
type RefusalKind = 'again' | 'first' | 'selector' | 'scoped' | 'exitIP' | 'exitIPSelector';
/** A block holding every refusing proxy's exit IP (catalogOf gives each its address). */
const EVERY_EXIT = parseExitIPTerm('10.0.0.0/8')!;
/**
 * A refusal: 'again' the same request each time (the remembered refusal answers it);
 * 'first' from a new owner each time, so none is remembered (the Redis store answers it
 * from the fleet's counts); 'selector' the same with a selector (geo=eu: two classes) and
 * 'scoped' with a token scope that admits every proxy (ten classes), each answered from its
 * classes' counts; 'exitIP' by an exit IP block every proxy is in, answered from the exit
 * counts (the block's range in the exit-ordered sets); 'exitIPSelector' the block and the
 * selector, from the by-class exit counts (the block's range in each class's).
 */
function refusal(store: LeaseStore, reason: string, kind: RefusalKind): () => Promise<void> {
  return async () => {
    const owner = `walk-${++walks}`;
    const result = await store.acquire({
      selector: kind === 'selector' || kind === 'exitIPSelector' ? { geo: 'eu' } : {},
      ttlSeconds: 60,
      target: REFUSED_TARGET,
      ...(kind === 'again' ? {} : { owner }),
      ...(kind === 'scoped' ? { within: () => true } : {}),
      ...(kind === 'exitIP' || kind === 'exitIPSelector' ? { exitIP: EVERY_EXIT } : {}),
    });
    if (result.granted || result.reason !== reason) throw new Error(`expected ${reason}`);
  };
}

// --- a worker process: one Redis store, measured on the parent's signal

interface WorkerCommand {
  url: string;
  prefix: string;
  proxies: number;
  seconds: number;
}

async function worker(): Promise<void> {
  const stores = new Map<string, { store: RedisLeaseStore; redis: Redis }>();
  process.on('message', (command: WorkerCommand | { stop: true }) => {
    void (async () => {
      if ('stop' in command) {
        for (const { store, redis } of stores.values()) {
          store.close();
          redis.disconnect();
        }
        process.exit(0);
      }
      const key = `${command.prefix}/${command.proxies}`;
      let entry = stores.get(key);
      if (entry === undefined) {
        const redis = connectRedis({ url: command.url, logger, timeoutMs: 5000 });
        await whenReady(redis);
        const store = new RedisLeaseStore({
          redis,
          catalog: catalogOf(command.proxies),
          logger,
          keyPrefix: command.prefix,
        });
        entry = { store, redis };
        stores.set(key, entry);
      }
      process.send!({ ready: true });
      const rate = await measure(leaseRelease(entry.store), command.seconds);
      process.send!({ rate });
    })();
  });
  // The parent gone (a failed run exits without stopping us): nothing will measure again.
  process.once('disconnect', () => process.exit(0));
  process.send!({ started: true });
}

class Worker {
  private readonly child: ChildProcess;
  private readonly waiting: ((message: { rate?: number; ready?: boolean }) => void)[] = [];
  readonly started: Promise<void>;
  constructor() {
    this.child = fork(new URL(import.meta.url), ['worker'], { stdio: 'inherit' });
    this.started = new Promise((resolve) => {
      this.child.on('message', (message: { started?: true; ready?: true; rate?: number }) => {
        if (message.started) resolve();
        else this.waiting.shift()?.(message);
      });
    });
  }
  /** Starts a measurement; resolves once the worker is connected, then `done` with its rate. */
  async run(command: WorkerCommand): Promise<{ done: Promise<number> }> {
    await this.started;
    const ready = new Promise<void>((resolve) => this.waiting.push(() => resolve()));
    const done = new Promise<number>((resolve) => this.waiting.push((m) => resolve(m.rate!)));
    this.child.send(command);
    await ready;
    return { done };
  }
  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send({ stop: true });
    });
  }
}

// --- the run

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main(): Promise<void> {
  console.log(
    `lease store bench: ${ROUNDS} rounds × ${SLICE_SECONDS} s per phase, concurrency ${CONCURRENCY}, fleets ${FLEETS.join(' and ')}; load average before: ${loadAverages()}`,
  );
  const redisServer = await startRedis();
  // The bench's redis-server goes with it, whatever ends the run.
  process.once('exit', () => redisServer.kill());
  const redis = connectRedis({ url: redisServer.url, logger, timeoutMs: 5000 });
  await whenReady(redis);
  const noop = await redis.script('LOAD', 'return 1');
  const workers = [new Worker(), new Worker()];

  type PhaseFn = () => Promise<Slice>;
  const phases = new Map<string, PhaseFn>();
  const cleanups: (() => void)[] = [];
  const local =
    (op: () => Promise<void>, concurrency = CONCURRENCY) =>
    async (): Promise<Slice> => {
      const redisBefore = await redisCpuSeconds(redis);
      const cpuBefore = process.cpuUsage();
      const { rate, ops } = await measureOps(op, SLICE_SECONDS, concurrency);
      const cpu = process.cpuUsage(cpuBefore);
      const redisMicros = ((await redisCpuSeconds(redis)) - redisBefore) * 1e6;
      return { rate, redisMicros: redisMicros / ops, clientMicros: (cpu.user + cpu.system) / ops };
    };
  phases.set(
    'raw PING (round trips/s)',
    local(async () => void (await redis.ping())),
  );
  phases.set(
    'raw EVALSHA of `return 1` (round trips/s)',
    local(async () => void (await redis.evalsha(noop as string, 0))),
  );
  for (const proxies of FLEETS) {
    const memory = new MemoryLeaseStore({ catalog: catalogOf(proxies), logger });
    cleanups.push(() => memory.close());
    const store = new RedisLeaseStore({
      redis,
      catalog: catalogOf(proxies),
      logger,
      keyPrefix: `bench-${proxies}`,
    });
    cleanups.push(() => store.close());
    phases.set(`memory store, ${proxies} proxies (lease+release/s)`, local(leaseRelease(memory)));
    for (const busy of [true, false]) {
      const reason = busy ? 'all_busy' : 'all_cooling_down';
      const refusingMemory = new MemoryLeaseStore({ catalog: catalogOf(proxies, 1), logger });
      cleanups.push(() => refusingMemory.close());
      await refusing(refusingMemory, busy);
      const refusingRedis = new RedisLeaseStore({
        redis,
        catalog: catalogOf(proxies, 1),
        logger,
        keyPrefix: `bench-${reason}-${proxies}`,
      });
      cleanups.push(() => refusingRedis.close());
      // Its leasable proxies in the book's registry first: the counts mark what is full from then.
      await refusingRedis.fleetSettled();
      await refusing(refusingRedis, busy);
      phases.set(
        `memory store, ${proxies} proxies, ${reason} (refusals/s)`,
        local(refusal(refusingMemory, reason, 'again')),
      );
      phases.set(
        `memory store, ${proxies} proxies, ${reason}, first (refusals/s)`,
        local(refusal(refusingMemory, reason, 'first')),
      );
      phases.set(
        `memory store, ${proxies} proxies, ${reason}, first, exit IP block (refusals/s)`,
        local(refusal(refusingMemory, reason, 'exitIP')),
      );
      phases.set(
        `memory store, ${proxies} proxies, ${reason}, first, exit IP block and selector (refusals/s)`,
        local(refusal(refusingMemory, reason, 'exitIPSelector')),
      );
      phases.set(
        `Redis store, ${proxies} proxies, ${reason} (refusals/s)`,
        local(refusal(refusingRedis, reason, 'again')),
      );
      phases.set(
        `Redis store, ${proxies} proxies, ${reason}, first (refusals/s)`,
        local(refusal(refusingRedis, reason, 'first')),
      );
      for (const kind of ['selector', 'scoped'] as const)
        phases.set(
          `Redis store, ${proxies} proxies, ${reason}, first, ${kind} (refusals/s)`,
          local(refusal(refusingRedis, reason, kind)),
        );
      phases.set(
        `Redis store, ${proxies} proxies, ${reason}, first, exit IP block (refusals/s)`,
        local(refusal(refusingRedis, reason, 'exitIP')),
      );
      phases.set(
        `Redis store, ${proxies} proxies, ${reason}, first, exit IP block and selector (refusals/s)`,
        local(refusal(refusingRedis, reason, 'exitIPSelector')),
      );
    }
    phases.set(`Redis store, 1 process, ${proxies} proxies (lease+release/s)`, local(leaseRelease(store)));
    phases.set(`Redis store, 2 processes, ${proxies} proxies (lease+release/s, sum)`, async () => {
      const redisBefore = await redisCpuSeconds(redis);
      const runs = await Promise.all(
        workers.map((w) =>
          w.run({ url: redisServer.url, prefix: `bench-shared-${proxies}`, proxies, seconds: SLICE_SECONDS }),
        ),
      );
      const rates = await Promise.all(runs.map((r) => r.done));
      const rate = rates.reduce((a, b) => a + b, 0);
      const redisMicros = ((await redisCpuSeconds(redis)) - redisBefore) * 1e6;
      return { rate, redisMicros: redisMicros / (rate * SLICE_SECONDS), clientMicros: Number.NaN };
    });
  }

  const results = new Map<string, Slice[]>([...phases.keys()].map((name) => [name, []]));
  process.stdout.write('warming up ');
  for (const phase of phases.values()) {
    await phase();
    process.stdout.write('.');
  }
  console.log();
  for (let round = 1; round <= ROUNDS; round++) {
    process.stdout.write(`round ${round}/${ROUNDS} `);
    for (const [name, phase] of phases) {
      results.get(name)!.push(await phase());
      process.stdout.write('.');
    }
    console.log(` load average ${loadavg()[0].toFixed(2)}`);
  }
  const pick = (name: string, field: keyof Slice) => median(results.get(name)!.map((s) => s[field]));
  const rate = (name: string) => pick(name, 'rate');
  console.log(`\n${'phase'.padEnd(70)} median/s  CPU µs/op: redis-server  this process`);
  for (const name of phases.keys()) {
    const client = pick(name, 'clientMicros');
    console.log(
      `${name.padEnd(70)} ${rate(name).toFixed(0).padStart(8)}  ${pick(name, 'redisMicros').toFixed(1).padStart(23)}  ${Number.isNaN(client) ? '           -' : client.toFixed(1).padStart(12)}`,
    );
  }

  const ceiling = rate('raw EVALSHA of `return 1` (round trips/s)');
  console.log(`\n${'ratio'.padEnd(78)} measured  target  met`);
  /** A ratio and its target: at least `target`, or (`atMost`) at most. */
  const ratio = (label: string, value: number, target?: number, atMost = false) => {
    const goal = target === undefined ? '     -' : `${atMost ? '≤' : '≥'} ${target.toFixed(2)}`;
    const met = target === undefined ? '' : (atMost ? value <= target : value >= target) ? 'yes' : 'NO';
    console.log(`${label.padEnd(78)} ${value.toFixed(2).padStart(8)}  ${goal}  ${met}`);
  };
  for (const proxies of FLEETS) {
    const one = rate(`Redis store, 1 process, ${proxies} proxies (lease+release/s)`);
    const two = rate(`Redis store, 2 processes, ${proxies} proxies (lease+release/s, sum)`);
    const memory = rate(`memory store, ${proxies} proxies (lease+release/s)`);
    ratio(`${proxies} proxies: Redis store (1 process) / memory store`, one / memory, 0.5);
    // Each lease+release is two round trips (one EVALSHA each).
    ratio(
      `${proxies} proxies: Redis store round trips (1 process) / raw EVALSHA ceiling`,
      (2 * one) / ceiling,
      0.5,
    );
    ratio(`${proxies} proxies: Redis store, 2 processes / 1 process`, two / one);
    for (const reason of ['all_busy', 'all_cooling_down']) {
      for (const kind of ['', ', first, exit IP block', ', first, exit IP block and selector']) {
        const refusals = rate(`memory store, ${proxies} proxies, ${reason}${kind} (refusals/s)`);
        ratio(
          `${proxies} proxies: memory store, time of a refusal ${reason}${kind} / of a lease+release`,
          memory / refusals,
          1,
          true,
        );
      }
    }
    // A granted lease is at most a lease+release's Redis CPU; a refusal should cost no more.
    const leaseMicros = pick(`Redis store, 1 process, ${proxies} proxies (lease+release/s)`, 'redisMicros');
    for (const reason of ['all_busy', 'all_cooling_down']) {
      for (const kind of [
        '',
        ', first',
        ', first, selector',
        ', first, scoped',
        ', first, exit IP block',
        ', first, exit IP block and selector',
      ]) {
        const micros = pick(`Redis store, ${proxies} proxies, ${reason}${kind} (refusals/s)`, 'redisMicros');
        ratio(
          `${proxies} proxies: Redis CPU of a refusal ${reason}${kind} / of a lease+release`,
          micros / leaseMicros,
          1,
          true,
        );
      }
    }
  }
  console.log(`load average after: ${loadAverages()}`);
  for (const cleanup of cleanups) cleanup();
  await Promise.all(workers.map((w) => w.stop()));
  redis.disconnect();
  await redisServer.stop();
}

if (process.argv[2] === 'worker') {
  void worker();
} else {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}

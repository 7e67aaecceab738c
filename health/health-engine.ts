import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { systemClock, type Clock } from './clock.js';
import { DueQueue } from './due-queue.js';
import { HealthMetrics } from './health-metrics.js';
import { ProbeReason, type ProbeOutcome } from './probe-reason.js';
import { sameEndpoint, validateProbeTarget, type ProbeTarget } from './probe-target.js';
import { SchedulingStats, type SchedulingSnapshot } from './scheduling-stats.js';
import type { Prober } from './prober.js';
import { recheckStep, type Recheck } from './recheck.js';
import { Semaphore } from './semaphore.js';
import { echoURLProblem, exitIPDue, judgeExitIP, type ExitIPPolicy, type ExitIPReading } from './exit-ip.js';
import { SocketProber, type SocketProberOptions } from './socket-prober.js';
import {
  DEFAULT_LATENCY_POLICY,
  INITIAL_HEALTH_STATE,
  decide,
  type HealthState,
  type LatencyPolicy,
  type Verdict,
} from './verdict.js';

export type TransitionListener = (key: string, verdict: Verdict) => void;

/** A proxy's exit IP was read and differs from the last one reported (or is the first). */
export type ExitIPListener = (key: string, exitIP: string) => void;

/**
 * The end of a recheck: `passed` by a probe that started at `startedAt` (this engine's
 * clock), or failed the threshold; `ticket`: what the recheck was asked with, handed back so
 * the asker can match the answer without comparing this engine's clock with its own.
 */
export interface RecheckResult {
  passed: boolean;
  startedAt: number;
  ticket?: string;
}

export type RecheckListener = (key: string, result: RecheckResult) => void;

export interface HealthEngineOptions {
  logger: Logger;
  registry: Registry;
  /** Probes in flight at once, across all proxies. */
  concurrency?: number;
  /** Each interval is stretched by a uniform factor in [1 - jitter, 1 + jitter]. */
  jitter?: number;
  latencyPolicy?: LatencyPolicy;
  clock?: Clock;
  /** Uniform [0, 1) source for jitter; injectable for deterministic tests. */
  random?: () => number;
  /** Replaces the socket prober (unit tests). */
  prober?: Prober;
  /** Extra CA for https probe URLs, passed to the default prober. */
  tls?: SocketProberOptions['tls'];
  /** Where `guarded` targets may be, passed to the default prober. */
  addressGuard?: SocketProberOptions['addressGuard'];
  /** Between the probes of a recheck (after an unreachable report). */
  recheckIntervalMillis?: number;
  /** Probes due within this window start together (see DueQueue); 0 starts each on its own. */
  batchMillis?: number;
  /** How often a proxy's exit IP is read again (after successful probes, never more often than them). */
  exitIPRefreshMillis?: number;
  /** What an echo answer must be to count (default: public, over https; see ExitIPPolicy). */
  exitIPPolicy?: ExitIPPolicy;
}

/**
 * An exit IP is read at the first successful probe at an endpoint, then at most once a
 * minute: it changes far more rarely than health does (a residential pool's rotation, an
 * upstream's failover), and every read is a second request through the proxy.
 */
export const DEFAULT_EXIT_IP_REFRESH_MILLIS = 60_000;

export const DEFAULT_RECHECK_INTERVAL_MILLIS = 1000;

/**
 * Permits needed ~ probe rate x probe duration: 1000 proxies every 10 s at ~0.3 s is ~30,
 * and black-holed proxies hold a permit for their whole timeout (5% at 5 s adds ~25).
 * 128 leaves twice that as headroom while still capping sockets and handshakes in flight.
 */
export const DEFAULT_CONCURRENCY = 128;
export const DEFAULT_JITTER = 0.1;
/**
 * Probes due within 200 ms of each other start together (early, keeping their planned times):
 * at 100 probes/s, ~20 share the event loop's turns (connect, CONNECT, handshake, response)
 * where one at a time each paid them alone. npm run bench:health (CPU per probe over the
 * naive loop's, a noisy machine): 1.14-1.24x at 200 ms, 1.21x at 100 ms, 1.02x at 500 ms
 * (event-loop delay rising with the batch), 1.24-1.58x without (docs/benchmarks.md).
 */
export const DEFAULT_BATCH_MILLIS = 200;

interface Entry {
  target: ProbeTarget;
  state: HealthState;
  /** Set while the probe is queued for a permit or running; never two at once. */
  inFlight: AbortController | undefined;
  /** Set while a recheck runs: probes follow its short interval instead of the schedule. */
  recheck?: Recheck;
  /** The exit IP last reported to listeners at this endpoint. */
  exitIP?: string;
  /** When the exit IP was last read (successfully or not); undefined = read at the next success. */
  exitIPReadAt?: number;
}

/**
 * Probes every registered proxy through itself on its own interval and publishes a verdict
 * only when it is worth a status write (see `decide`). Knows nothing about Kubernetes.
 */
export class HealthEngine {
  private readonly entries = new Map<string, Entry>();
  private readonly listeners: TransitionListener[] = [];
  private readonly recheckListeners = new Set<RecheckListener>();
  private readonly exitIPListeners = new Set<ExitIPListener>();
  private readonly exitIPRefreshMillis: number;
  private readonly exitIPPolicy: ExitIPPolicy;
  private readonly queue: DueQueue;
  private readonly semaphore: Semaphore;
  private readonly metrics: HealthMetrics;
  private readonly schedulingStats = new SchedulingStats();
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly jitter: number;
  private readonly latencyPolicy: LatencyPolicy;
  private readonly prober: Prober;
  private readonly recheckIntervalMillis: number;
  private running = false;

  constructor(options: HealthEngineOptions) {
    const jitter = options.jitter ?? DEFAULT_JITTER;
    if (!(jitter >= 0 && jitter < 1)) throw new RangeError(`jitter must be in [0, 1), got ${jitter}`);
    this.jitter = jitter;
    this.semaphore = new Semaphore(options.concurrency ?? DEFAULT_CONCURRENCY);
    this.logger = options.logger;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.latencyPolicy = options.latencyPolicy ?? DEFAULT_LATENCY_POLICY;
    this.prober =
      options.prober ?? new SocketProber({ tls: options.tls, addressGuard: options.addressGuard });
    this.recheckIntervalMillis = options.recheckIntervalMillis ?? DEFAULT_RECHECK_INTERVAL_MILLIS;
    if (!(this.recheckIntervalMillis > 0)) {
      throw new RangeError(`recheckIntervalMillis must be > 0, got ${this.recheckIntervalMillis}`);
    }
    this.exitIPRefreshMillis = options.exitIPRefreshMillis ?? DEFAULT_EXIT_IP_REFRESH_MILLIS;
    this.exitIPPolicy = options.exitIPPolicy ?? { allowNonPublic: false };
    this.metrics = new HealthMetrics(options.registry);
    this.queue = new DueQueue(
      this.clock,
      (key, plannedAt) => this.due(key, plannedAt),
      options.batchMillis ?? DEFAULT_BATCH_MILLIS,
    );
  }

  /**
   * Adds or updates a target. A new host, port or probeURL is a different endpoint: the
   * in-flight probe is cancelled and counters and verdict start over. Other changes apply
   * from the next probe on. Throws InvalidProbeTargetError on bad input.
   */
  upsert(target: ProbeTarget): void {
    validateProbeTarget(target);
    // A private copy: the caller mutating its object later must not change a running schedule.
    const copy: ProbeTarget = { ...target, expectedStatusCodes: [...target.expectedStatusCodes] };
    const entry = this.entries.get(copy.key);
    if (!entry) {
      this.entries.set(copy.key, { target: copy, state: INITIAL_HEALTH_STATE, inFlight: undefined });
      this.scheduleFirst(copy);
      return;
    }
    const previous = entry.target;
    entry.target = copy;
    // Another echo service may see the proxy otherwise: read at the next success.
    if (previous.exitIPURL !== copy.exitIPURL) entry.exitIPReadAt = undefined;
    if (!sameEndpoint(previous, copy)) {
      entry.inFlight?.abort();
      entry.inFlight = undefined;
      entry.state = INITIAL_HEALTH_STATE;
      entry.exitIP = undefined;
      entry.exitIPReadAt = undefined;
      void this.prober.release(copy.key);
      this.scheduleFirst(copy);
      return;
    }
    if (previous.intervalSeconds !== copy.intervalSeconds && !entry.inFlight) {
      // A shorter interval should not wait out the old, longer one.
      const sooner = this.clock.now() + this.jitteredInterval(copy);
      const current = this.queue.dueAt(copy.key);
      if (current === undefined || sooner < current) this.queue.schedule(copy.key, sooner);
    }
  }

  /** Forgets a target: cancels its in-flight probe, closes its agent, drops its metric series. */
  remove(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.inFlight?.abort();
    this.entries.delete(key);
    this.queue.cancel(key);
    this.metrics.forget(key);
    void this.prober.release(key);
  }

  /** The current verdict, or undefined while neither threshold has been reached yet. */
  verdict(key: string): Verdict | undefined {
    return this.entries.get(key)?.state.verdict;
  }

  /** Registers a listener for publishable verdicts; returns an unsubscribe function. */
  onTransition(listener: TransitionListener): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /**
   * Probes a proxy out of schedule (a client found it unreachable): at once — or right after
   * a probe already in flight, which started too early to count — then every recheck interval
   * until a probe passes or failureThreshold fail; the end goes to onRecheck listeners with
   * `ticket`. Any probe that started after the request counts, a scheduled one too. A proxy
   * already being rechecked for the same ticket starts nothing: returns false then, and for
   * unknown keys; another ticket (a newer request) starts over from now.
   */
  recheck(key: string, ticket?: string): boolean {
    const entry = this.entries.get(key);
    if (!entry || (entry.recheck && entry.recheck.ticket === ticket)) return false;
    entry.recheck = {
      requestedAt: this.clock.now(),
      failures: 0,
      ...(ticket === undefined ? {} : { ticket }),
    };
    this.metrics.countRecheck();
    if (!entry.inFlight) this.queue.schedule(key, this.clock.now());
    return true;
  }

  /** The exit IP last read at the target's current endpoint, if any. */
  exitIP(key: string): string | undefined {
    return this.entries.get(key)?.exitIP;
  }

  /** Registers a listener for exit IP changes (see ExitIPListener); returns an unsubscribe function. */
  onExitIP(listener: ExitIPListener): () => void {
    this.exitIPListeners.add(listener);
    return () => this.exitIPListeners.delete(listener);
  }

  /** Registers a listener for the end of each recheck; returns an unsubscribe function. */
  onRecheck(listener: RecheckListener): () => void {
    this.recheckListeners.add(listener);
    return () => this.recheckListeners.delete(listener);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    for (const entry of this.entries.values()) {
      if (!entry.inFlight && this.queue.dueAt(entry.target.key) === undefined)
        this.scheduleFirst(entry.target);
    }
    this.queue.start();
  }

  /** Aborts every probe and closes every agent. Targets stay registered; start() resumes. */
  async stop(): Promise<void> {
    this.running = false;
    this.queue.stop();
    this.queue.clear();
    for (const entry of this.entries.values()) {
      entry.inFlight?.abort();
      entry.inFlight = undefined;
      // The book tells the next listener (the next term's runner) of every suspicion still
      // running (LeaseStore.onProbeRequest): its recheck starts again then.
      entry.recheck = undefined;
    }
    await this.prober.close();
  }

  stats(): SchedulingSnapshot {
    return this.schedulingStats.snapshot();
  }

  resetStats(): void {
    this.schedulingStats.reset();
  }

  private jitteredInterval(target: ProbeTarget): number {
    return target.intervalSeconds * 1000 * (1 + this.jitter * (2 * this.random() - 1));
  }

  /** Spreads first probes over one interval so a thousand upserts at startup do not probe at once. */
  private scheduleFirst(target: ProbeTarget): void {
    this.queue.schedule(target.key, this.clock.now() + this.random() * target.intervalSeconds * 1000);
  }

  private due(key: string, plannedAt: number): void {
    const entry = this.entries.get(key);
    if (!entry || entry.inFlight) return;
    const controller = new AbortController();
    entry.inFlight = controller;
    void this.run(entry, controller, plannedAt);
  }

  private async run(entry: Entry, controller: AbortController, plannedAt: number): Promise<void> {
    if (!(await this.semaphore.acquire(controller.signal))) return;
    const target = entry.target;
    const startedAt = this.clock.now();
    let outcome: ProbeOutcome;
    let exitIP: ExitIPReading | undefined;
    try {
      this.schedulingStats.recordLateness(this.clock.now() - plannedAt);
      this.schedulingStats.probesStarted++;
      outcome = await this.prober.probe(target, controller.signal).catch((err: unknown): ProbeOutcome => ({
        success: false,
        reason: ProbeReason.ProbeError,
        message: `prober failed: ${err instanceof Error ? err.message : String(err)}`,
        durationMillis: 0,
      }));
      // Only through a proxy that just worked: a dead proxy's failed read would say nothing new.
      // Inside the same permit and before inFlight clears, so it never overlaps a probe.
      if (
        outcome.success &&
        target.exitIPURL !== undefined &&
        this.prober.readExitIP !== undefined &&
        !controller.signal.aborted &&
        exitIPDue(entry.exitIPReadAt, this.clock.now(), this.exitIPRefreshMillis)
      ) {
        entry.exitIPReadAt = this.clock.now();
        exitIP =
          echoURLProblem(target.exitIPURL, target.host, this.exitIPPolicy) ??
          judgeExitIP(
            await this.prober.readExitIP(target, controller.signal).catch((err: unknown): ExitIPReading => ({
              ok: false,
              reason: 'RequestFailed',
              message: `prober failed: ${err instanceof Error ? err.message : String(err)}`,
            })),
            this.exitIPPolicy,
          );
      }
    } finally {
      this.semaphore.release();
    }
    // Cancelled (removed, endpoint changed, stopped): the result describes nothing current.
    if (controller.signal.aborted || entry.inFlight !== controller) return;
    entry.inFlight = undefined;
    this.schedulingStats.probesCompleted++;
    this.record(entry, outcome);
    if (exitIP !== undefined) this.recordExitIP(entry, exitIP);
    if (entry.recheck && this.entries.get(target.key) === entry) {
      this.followRecheck(entry, entry.recheck, startedAt, outcome.success);
      return;
    }
    // Overran its interval (timeout > interval): next probe right away, still never overlapping.
    this.queue.schedule(target.key, Math.max(plannedAt + this.jitteredInterval(target), this.clock.now()));
  }

  private followRecheck(entry: Entry, recheck: Recheck, startedAt: number, success: boolean): void {
    const { key } = entry.target;
    const step = recheckStep(recheck, { startedAt, success }, entry.target.failureThreshold);
    const now = this.clock.now();
    if (step.kind !== 'done') {
      entry.recheck = step.recheck;
      this.queue.schedule(key, step.kind === 'probe_now' ? now : now + this.recheckIntervalMillis);
      return;
    }
    entry.recheck = undefined;
    this.queue.schedule(key, now + this.jitteredInterval(entry.target));
    this.logger.info({ proxy: key, passed: step.passed }, 'recheck after an unreachable report ended');
    for (const listener of [...this.recheckListeners]) {
      try {
        const ticket = recheck.ticket;
        listener(key, { passed: step.passed, startedAt, ...(ticket === undefined ? {} : { ticket }) });
      } catch (err) {
        this.logger.error({ proxy: key, err }, 'recheck listener threw');
      }
    }
  }

  /** A failed read keeps the last exit IP (the proxy is healthy; the echo service may not be). */
  private recordExitIP(entry: Entry, reading: ExitIPReading): void {
    const { key } = entry.target;
    if (!reading.ok) {
      this.metrics.countExitIPFailure(reading.reason);
      this.logger.warn(
        { proxy: key, reason: reading.reason, detail: reading.message, kept: entry.exitIP ?? null },
        'could not read the exit IP of a healthy proxy; keeping the last one',
      );
      return;
    }
    if (reading.ip === entry.exitIP) return;
    const previous = entry.exitIP;
    entry.exitIP = reading.ip;
    this.logger.info({ proxy: key, exitIP: reading.ip, previous: previous ?? null }, 'proxy exit IP read');
    for (const listener of [...this.exitIPListeners]) {
      try {
        listener(key, reading.ip);
      } catch (err) {
        this.logger.error({ proxy: key, err }, 'exit IP listener threw');
      }
    }
  }

  private record(entry: Entry, outcome: ProbeOutcome): void {
    const { key } = entry.target;
    this.metrics.observe(key, outcome.durationMillis, outcome.success ? undefined : outcome.reason);
    if (!outcome.success)
      this.logger.debug({ proxy: key, reason: outcome.reason, detail: outcome.message }, 'probe failed');
    const decision = decide(
      entry.state,
      outcome,
      new Date(this.clock.now()),
      entry.target,
      this.latencyPolicy,
    );
    entry.state = decision.state;
    const verdict = decision.state.verdict;
    if (!decision.transition || !verdict) return;
    this.schedulingStats.transitionsEmitted++;
    this.logger.info(
      {
        proxy: key,
        cause: decision.transition,
        healthy: verdict.healthy,
        reason: verdict.reason,
        latencyMillis: verdict.latencyMillis,
      },
      'proxy health transition',
    );
    for (const listener of [...this.listeners]) {
      try {
        listener(key, verdict);
      } catch (err) {
        this.logger.error({ proxy: key, err }, 'health transition listener threw');
      }
    }
  }
}

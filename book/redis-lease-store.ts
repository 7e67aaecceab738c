// The Redis-backed LeaseStore: one book shared by every replica (API and gateway), and
// kept across restarts. Every operation is one Lua script (redis-scripts.ts) run with
// EVALSHA: atomic on the server, one round trip in the common case.
//
// The replica ranks; Redis decides. Each replica keeps its own catalog (the informer cache)
// and, for ranking only, a hint of every proxy's load learnt from Redis's answers. A lease
// request sends the first few candidates in (hinted load, latency, id) order; the script
// reads their true loads, cooldowns and holds and claims the best one under its cap. When
// none of them can take it (all full, cooling or held), the next, larger chunk goes, so a
// stale hint costs a round trip, never a wrong answer.
//
// The parts: redis-script-runner.ts runs the scripts; redis-acquire-walk.ts is the acquire
// (its chunks, sessions and remembered refusals); redis-reports.ts and redis-read-replies.ts
// are the reports' and the reads' arguments and replies; redis-probe-requests.ts and
// redis-egress-feed.ts are what this replica hears from and tells the book in the background.

import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { addressOf, type CatalogChange, type ProxyCatalog } from './catalog.js';
import { HintedRanking } from './hinted-ranking.js';
import { isLeasable } from './lease-selection.js';
import type {
  AcquireResult,
  BatchReport,
  HealthObservation,
  Lease,
  LeaseRequest,
  LeaseStore,
  ProbeRequestListener,
  ProxyStanding,
  ProxyUsage,
  RenewResult,
  ReportDetails,
  ReportOutcome,
  ReportResult,
  StoreTotals,
} from './lease-store.js';
import type { Clock } from './clock.js';
import { leaseBookSettings, type LeaseBookOptions } from './lease-book-settings.js';
import { decodeLease, decodeReleaseReply } from './redis-book-codec.js';
import { CooldownQuotaRefusal } from './lease-store.js';
import { scopedKey, unscopedKey } from './lease-owner.js';
import { requestKey } from './request-outcomes.js';
import { RedisAcquireWalk } from './redis-acquire-walk.js';
import { RedisEgressFeed } from './redis-egress-feed.js';
import { RedisFleetFeed } from './redis-fleet-feed.js';
import { RedisProbeRequests } from './redis-probe-requests.js';
import { standingFrom, totalsFrom, usageFrom, usagesFrom, type StatsWindow } from './redis-read-replies.js';
import { reportArgs, reportOutcomes } from './redis-reports.js';
import { RedisScriptRunner, translate } from './redis-script-runner.js';
import { RedisSessionHints } from './redis-session-hints.js';
import type { ScriptName } from './redis-scripts.js';

export const DEFAULT_REDIS_KEY_PREFIX = 'proxy-operator';

/** A key prefix is a plain name: it goes inside a hash tag, `{prefix}`, in every key. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export interface RedisLeaseStoreOptions extends LeaseBookOptions {
  /** A connected (or connecting) client; the store owns it from here (stop() leaves it open). */
  redis: Redis;
  catalog: ProxyCatalog;
  logger: Logger;
  /** Two operators sharing one Redis need different prefixes. */
  keyPrefix?: string;
  /** A test's clock; absent: Redis's own TIME, one clock for every replica. */
  clock?: Clock;
}

export class RedisLeaseStore implements LeaseStore {
  private readonly redis: Redis;
  private readonly catalog: ProxyCatalog;
  private readonly logger: Logger;
  private readonly random: () => number;
  private readonly newID: () => string;
  private readonly prefix: string;
  private readonly scripts: RedisScriptRunner;
  private readonly window: StatsWindow;
  private readonly sweepIntervalMs: number;
  /** The catalog's leasable proxies with their hinted loads, in ranking order. */
  private readonly ranking = new HintedRanking();
  private readonly sessions = new RedisSessionHints();
  private readonly walk: RedisAcquireWalk;
  private readonly probeRequests: RedisProbeRequests;
  private readonly egress: RedisEgressFeed;
  /** This replica's leasable proxies told to the book: its refusals from counts. */
  private readonly fleet: RedisFleetFeed;
  private readonly unsubscribe: () => void;
  private timer: NodeJS.Timeout | undefined;
  /** Changes of this replica's catalog: a remembered refusal holds only while this does. */
  private catalogVersion = 0;

  constructor(options: RedisLeaseStoreOptions) {
    const prefix = options.keyPrefix ?? DEFAULT_REDIS_KEY_PREFIX;
    if (!KEY_PREFIX_PATTERN.test(prefix)) {
      throw new Error(`keyPrefix must match ${KEY_PREFIX_PATTERN.source}, got ${JSON.stringify(prefix)}`);
    }
    const settings = leaseBookSettings(options);
    this.window = { statsWindowSeconds: settings.statsWindowSeconds, bucketMillis: settings.bucketMillis };
    this.sweepIntervalMs = settings.sweepIntervalMs;

    this.redis = options.redis;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.random = options.random ?? Math.random;
    this.newID = options.newID ?? randomUUID;
    this.prefix = `{${prefix}}`;
    this.scripts = new RedisScriptRunner(this.redis, this.prefix, settings, options.clock);
    this.fleet = new RedisFleetFeed({
      send: (args) => this.eval('fleet', args),
      read: (what) => this.eval('fleetRead', [what]),
      logger: this.logger,
    });
    this.walk = new RedisAcquireWalk({
      fleet: () => this.fleet.fingerprint(),
      classes: (selector, within) => this.fleet.matchingClasses(selector, within),
      eval: (name, args) => this.eval(name, args),
      ranking: this.ranking,
      sessions: this.sessions,
      window: this.window,
      clock: options.clock,
      catalogVersion: () => this.catalogVersion,
      owned: (stored, owner) => this.owned(stored, owner),
      usage: (proxyIDs) => this.usage(proxyIDs),
    });
    this.probeRequests = new RedisProbeRequests(
      this.redis,
      `${this.prefix}:probe-requests`,
      this.logger,
      () => this.eval('suspects', []),
    );
    this.egress = new RedisEgressFeed((args) => this.eval('egress', args), this.logger);
    for (const proxy of this.catalog.records()) this.catalogChanged({ after: proxy });
    this.unsubscribe = this.catalog.subscribe((change) => this.catalogChanged(change));
  }

  async acquire(request: LeaseRequest): Promise<AcquireResult> {
    return this.walk.acquire(request, this.newID());
  }

  async renew(
    leaseID: string,
    ttlSeconds?: number,
    owner?: string,
    requestID?: string,
  ): Promise<RenewResult | undefined> {
    const requested = requestKey('renew', owner, requestID, leaseID);
    const args = [scopedKey(owner, leaseID), ttlSeconds === undefined ? '' : String(ttlSeconds)];
    if (requested !== undefined) args.push(requested);
    const reply = (await this.eval('renew', args)) as [string, number, string, string[], number] | null;
    if (reply === null) return undefined;
    const lease = this.owned(decodeLease(leaseID, reply[0]), owner);
    this.hint(lease.proxyID, Number(reply[1]));
    if (lease.session !== undefined) this.sessions.remember(scopedKey(owner, lease.session), lease.proxyID);
    return { lease, usage: usageFrom(this.window, reply[1], reply[2], reply[3], Number(reply[4])) };
  }

  async release(leaseID: string, owner?: string, requestID?: string): Promise<boolean> {
    const requested = requestKey('release', owner, requestID, leaseID);
    const args = [scopedKey(owner, leaseID)];
    if (requested !== undefined) args.push(requested);
    const reply = decodeReleaseReply((await this.eval('release', args)) as string | null);
    // -1: the lease had ended already (its count is settled where it was pruned).
    if (reply === undefined || reply.load < 0) return false;
    this.hint(reply.proxyID, reply.load);
    return true;
  }

  async report(
    leaseID: string,
    result: ReportResult,
    details: ReportDetails = {},
    owner?: string,
    requestID?: string,
  ): Promise<ReportOutcome | undefined> {
    const [outcome] = await this.reports(
      [{ leaseID, result, details }],
      owner,
      requestKey('report', owner, requestID, leaseID) ?? '',
    );
    return outcome;
  }

  async reportMany(
    reports: readonly BatchReport[],
    owner?: string,
    requestID?: string,
  ): Promise<(ReportOutcome | undefined)[]> {
    return this.reports(reports, owner, requestKey('reports', owner, requestID) ?? '');
  }

  /** The report script: every report (and release) of the call in one atomic step. */
  private async reports(
    reports: readonly BatchReport[],
    owner: string | undefined,
    requested: string,
  ): Promise<(ReportOutcome | undefined)[]> {
    const raw = (await this.eval('report', reportArgs(reports, owner, requested, this.random))) as
      string[] | string;
    // "quota\0i": report i (1-based) is beyond its owner's cooldown quota; nothing recorded.
    if (typeof raw === 'string') throw new CooldownQuotaRefusal(Number(raw.split('\0')[1]) - 1);
    return reportOutcomes(reports, raw, (stored) => this.owned(stored, owner));
  }

  async observeHealth(proxyID: string, observation: HealthObservation): Promise<void> {
    const current = this.catalog.get(proxyID);
    // About another address than the proxy's current one: news of a proxy that is gone.
    if (current !== undefined && addressOf(current) !== observation.address) return;
    const suspicion = observation.kind === 'probe_passed' ? observation.suspicion : '';
    await this.eval('observe', [proxyID, observation.kind, observation.address, suspicion]);
  }

  onProbeRequest(listener: ProbeRequestListener): () => void {
    return this.probeRequests.onProbeRequest(listener);
  }

  async endSession(key: string, owner?: string): Promise<void> {
    const scoped = scopedKey(owner, key);
    this.sessions.forget(scoped);
    await this.eval('endSession', [scoped]);
  }

  async usage(proxyIDs: readonly string[]): Promise<ProxyUsage[]> {
    if (proxyIDs.length === 0) return [];
    // Reads only, one script: on Redis's clock, whose time comes back with the data (decision
    // 0024): holds and windows are decoded with it, never with this replica's clock.
    const reply = await this.eval('usage', [...proxyIDs]);
    return usagesFrom(
      this.window,
      proxyIDs,
      reply,
      (id) => this.addressOf(id),
      (id, load) => this.hint(id, load),
    );
  }

  async standing(proxyID: string): Promise<ProxyStanding> {
    // Reads only, one script on Redis's clock: the usage keys and the proxy's running
    // cooldowns and who reported them, with the time they were read at.
    const standing = standingFrom(
      this.window,
      await this.eval('standing', [proxyID]),
      this.addressOf(proxyID),
    );
    this.hint(proxyID, standing.usage.activeLeases);
    return standing;
  }

  async get(leaseID: string, owner?: string): Promise<Lease | undefined> {
    const reply = (await this.eval('get', [scopedKey(owner, leaseID)])) as string | null;
    return reply === null ? undefined : this.owned(decodeLease(leaseID, reply), owner);
  }

  async countFailedAuth(address: string, ratePerSecond: number, burst: number): Promise<number> {
    return Number(await this.eval('failedAuth', [address, String(ratePerSecond), String(burst)]));
  }

  async totals(): Promise<StoreTotals> {
    const [now, figures, busy] = totalsFrom((await this.eval('totals', [])) as unknown[]);
    const activeLeases = await this.liveLeases(now, busy);
    return { activeLeases, ...figures };
  }

  async start(): Promise<void> {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => void this.sweep(), this.sweepIntervalMs);
    // The loop only frees memory; it must not keep the process alive on shutdown.
    this.timer.unref();
    this.redis.on('ready', this.preload);
    if (this.redis.status === 'ready') this.preload();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.redis.off('ready', this.preload);
  }

  /** Loads every script into Redis's script cache (redis-script-runner.ts). */
  async loadScripts(): Promise<void> {
    await this.scripts.loadScripts();
  }

  private readonly preload = (): void => {
    this.loadScripts().catch((err: unknown) =>
      this.logger.debug({ err }, 'could not load the scripts; the first call of each loads it'),
    );
  };

  /** Stops following the catalog and closes the subscriber (a store that is thrown away). */
  close(): void {
    this.egress.close();
    this.fleet.close();
    this.unsubscribe();
    this.probeRequests.close();
  }

  /**
   * Frees Redis memory of ended state (a bounded amount per call) and refreshes the load
   * hints of proxies this replica believes busy (other replicas' releases and expiries).
   * Correctness never waits for it.
   */
  async sweep(): Promise<void> {
    try {
      await this.eval('sweep', []);
      await this.fleet.reconcile();
      const busy = this.ranking.busy();
      // 200 a call, as a list page: the usage script holds the server while it reads.
      for (let i = 0; i < busy.length; i += 200) await this.usage(busy.slice(i, i + 200));
    } catch (err) {
      this.logger.warn({ err }, 'lease store sweep failed; retrying on the next interval');
    }
  }

  // --- internals

  /** A stored lease as its owner sees it: the owner named, the session key unscoped. */
  private owned(stored: Lease, owner: string | undefined): Lease {
    // The book keeps no credentials: the proxy's come from this replica's catalog.
    const credentials = this.catalog.get(stored.proxyID)?.credentials;
    const lease = credentials === undefined ? stored : { ...stored, proxy: { ...stored.proxy, credentials } };
    if (owner === undefined) return lease;
    return {
      ...lease,
      owner,
      ...(lease.session === undefined ? {} : { session: unscopedKey(owner, lease.session) }),
    };
  }

  /** The live leases of these proxies at `now` (Redis's clock): reads, 1,000 proxies a round trip. */
  private async liveLeases(now: number, proxyIDs: readonly string[]): Promise<number> {
    let live = 0;
    for (let i = 0; i < proxyIDs.length; i += 1000) {
      const pipeline = this.redis.pipeline();
      for (const id of proxyIDs.slice(i, i + 1000))
        pipeline.zcount(`${this.prefix}:load:${id}`, `(${now}`, '+inf');
      const replies = await this.guard(() => pipeline.exec());
      for (const [err, count] of replies!) {
        if (err) throw translate(err);
        live += Number(count);
      }
    }
    return live;
  }

  /** The proxy's current address in this replica's catalog ('' = not there). */
  private addressOf(proxyID: string): string {
    const record = this.catalog.get(proxyID);
    return record === undefined ? '' : addressOf(record);
  }

  private hint(proxyID: string, load: number): void {
    this.ranking.hint(proxyID, load);
  }

  private catalogChanged({ before, after }: CatalogChange): void {
    this.catalogVersion++;
    const id = (before ?? after)!.id;
    if (after !== undefined && isLeasable(after)) {
      this.ranking.add(after);
      this.fleet.set(id, after);
    } else {
      this.ranking.delete(id);
      this.fleet.set(id, undefined);
    }
    if (after === undefined) this.egress.forget(id);
    else this.egress.follow(after);
    // The book's down hold ends when the proxy moved or its status turned healthy again
    // (proxy-holds.ts's onRecordChanged: never when it turns unhealthy, which a replica whose
    // cache lags has not seen yet); in the background: a catalog event cannot wait for Redis,
    // and every replica sends the same idempotent update.
    if (before !== undefined && after !== undefined) {
      const moved = addressOf(before) !== addressOf(after);
      if (moved || (!before.healthy && after.healthy)) {
        this.eval('observe', [id, 'catalog', addressOf(after), after.healthy ? '1' : '0']).catch(
          (err: unknown) =>
            this.logger.warn({ err, proxyID: id }, 'could not update the shared book after a catalog change'),
        );
      }
    }
  }

  /** Resolves once the egresses this replica has seen are in the book (tests wait for it). */
  async egressSettled(): Promise<void> {
    await this.egress.settled();
  }

  /** Resolves once this replica's leasable proxies are in the book's registry (tests wait for it). */
  async fleetSettled(): Promise<void> {
    await this.fleet.settled();
  }

  /** Whether the probe-request subscription is live and the running suspicions were told (tests wait for it). */
  async subscribed(): Promise<void> {
    await this.probeRequests.subscribed();
  }

  private eval(name: ScriptName, args: string[]): Promise<unknown> {
    return this.scripts.eval(name, args);
  }

  private async guard<T>(call: () => Promise<T>): Promise<T> {
    return this.scripts.guard(call);
  }
}

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
import { createHash, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { CatalogChange, ProxyCatalog, ProxyRecord } from './catalog.js';
import { COOLDOWN_JITTER } from './cooldown-policy.js';
import { egressOf } from './egress.js';
import { HintedRanking } from './hinted-ranking.js';
import type { ProxyCooldown } from './lease-store.js';
import { isLeasable, refusal } from './lease-selection.js';
import type {
  AcquireResult,
  BatchReport,
  HealthObservation,
  HoldReason,
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
import type { Clock } from './memory-lease-store.js';
import { WINDOW_BUCKETS } from './outcome-window.js';
import { leaseBookSettings, type LeaseBookOptions } from './lease-book-settings.js';
import {
  acquireArgs,
  addressOf,
  decodeAcquireReply,
  decodeLease,
  decodeReleaseReply,
  decodeReportReply,
  oldestBucket,
  rankCandidates,
  windowCounts,
  type LoadHints,
} from './redis-book-codec.js';
import { buildScripts, type LuaScript, type ScriptName } from './redis-scripts.js';
import { proxyMatcher } from './selector.js';
import { StoreUnavailableError } from './store-unavailable.js';
import { scopedKey, unscopedKey } from './lease-owner.js';
import { agreed } from './ban-agreement.js';
import { requestKey } from './request-outcomes.js';
import {
  mayShareWalk,
  RefusalMemos,
  refusalAt,
  refusalKey,
  rememberRefusal,
  stillRefused,
} from './refusal-memo.js';

/** Separates a reporters field's target from the reporter (targets never hold it). */
const NUL = '\u0000';

export const DEFAULT_REDIS_KEY_PREFIX = 'proxy-operator';
/** What a 503 store_unavailable tells the client to wait. */
export const STORE_RETRY_AFTER_SECONDS = 1;

/** A key prefix is a plain name: it goes inside a hash tag, `{prefix}`, in every key. */
export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Candidates sent per round trip: the first chunk is small (the common case: the replica's
 * best-ranked proxy is free), then larger. Each candidate costs the acquire script ~3-7 µs of
 * Redis time (its arguments, three batch reads, the choice); 4 instead of 8 took ~14 µs off
 * the average call (docs/benchmarks.md).
 */
const CHUNKS = [4, 32, 256, 2048];
/** Proxies per egress script call (its reply lists the renewed ones: bounded). */
const EGRESS_CHUNK = 500;
/** Session → proxy bindings this replica remembers, so a sticky lease is one round trip. */
const SESSION_HINTS = 10_000;
const NO_TARGET = '\u0000';
/** The report script's cooldownUntil when the target could not be recorded at a cap. */
const CAPPED = -2;

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
  private readonly clock: Clock | undefined;
  private readonly random: () => number;
  private readonly newID: () => string;
  private readonly prefix: string;
  private readonly countersKey: string;
  private readonly channel: string;
  private readonly scripts: Record<ScriptName, LuaScript>;
  private readonly statsWindowSeconds: number;
  private readonly bucketMillis: number;
  private readonly sweepIntervalMs: number;
  private readonly shas = {} as Record<ScriptName, string>;
  /** The catalog's leasable proxies with their hinted loads, in ranking order. */
  private readonly ranking = new HintedRanking();
  private readonly sessionHints = new Map<string, string>();
  private readonly listeners = new Set<ProbeRequestListener>();
  private readonly unsubscribe: () => void;
  /** Each proxy's egress this replica sent the book last (egress.ts): unchanged ones go once. */
  private readonly egressSent = new Map<string, string>();
  /**
   * Egresses to send, in one background batch per turn of the event loop, in the order seen:
   * the book must see each step (a first exit IP read, then a new one, is two).
   */
  private egressPending: Array<[string, string]> = [];
  private egressFlush: Promise<void> | undefined;
  private closed = false;
  private subscriber: Redis | undefined;
  /** How many times the running suspicions were read for the listeners (tests wait for one). */
  private pendingTold = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Refusals answered again with one small script instead of a walk (refusal-memo.ts). */
  private readonly refusals = new RefusalMemos();
  /** Changes of this replica's catalog: a remembered refusal holds only while this does. */
  private catalogVersion = 0;
  /** The walk in flight per refusal shape, with the version read before it (single flight). */
  private readonly walks = new Map<string, { version: string; answer: Promise<AcquireResult> }>();

  constructor(options: RedisLeaseStoreOptions) {
    const prefix = options.keyPrefix ?? DEFAULT_REDIS_KEY_PREFIX;
    if (!KEY_PREFIX_PATTERN.test(prefix)) {
      throw new Error(`keyPrefix must match ${KEY_PREFIX_PATTERN.source}, got ${JSON.stringify(prefix)}`);
    }
    const settings = leaseBookSettings(options);
    this.statsWindowSeconds = settings.statsWindowSeconds;
    this.sweepIntervalMs = settings.sweepIntervalMs;

    this.redis = options.redis;
    this.catalog = options.catalog;
    this.logger = options.logger;
    this.clock = options.clock;
    this.random = options.random ?? Math.random;
    this.newID = options.newID ?? randomUUID;
    this.prefix = `{${prefix}}`;
    this.countersKey = `${this.prefix}:counters`;
    this.channel = `${this.prefix}:probe-requests`;
    this.bucketMillis = settings.bucketMillis;
    // Settings are constants of this store's scripts: no per-call parsing in Redis.
    this.scripts = buildScripts({
      prefix: this.prefix,
      windowMillis: this.statsWindowSeconds * 1000,
      bucketMillis: this.bucketMillis,
      idleMillis: settings.sessionIdleMillis,
      maxSessions: settings.maxSessions,
      banBaseMillis: settings.banBaseMillis,
      banMaxMillis: settings.banMaxMillis,
      rateLimitBaseMillis: settings.rateLimitBaseMillis,
      rateLimitMaxMillis: settings.rateLimitMaxMillis,
      singleCooldownWindow: settings.singleCooldownWindow,
      suspicionMillis: settings.suspicionTimeoutMillis,
      holdoffMillis: settings.suspicionHoldoffMillis,
      maxTargetsPerProxy: settings.maxTargetsPerProxy,
      maxTargetEntries: settings.maxTargetEntries,
      jitter: COOLDOWN_JITTER,
      buckets: WINDOW_BUCKETS,
      clockArgument: this.clock !== undefined,
    });
    for (const script of Object.values(this.scripts)) {
      this.shas[script.name as ScriptName] = createHash('sha1').update(script.source).digest('hex');
    }
    for (const proxy of this.catalog.records()) this.catalogChanged({ after: proxy });
    this.unsubscribe = this.catalog.subscribe((change) => this.catalogChanged(change));
  }

  async acquire(request: LeaseRequest): Promise<AcquireResult> {
    const leaseID = this.newID();
    // Without a session the script never answers 'need': one try.
    if (request.session === undefined) return this.acquireOrRemembered(request, leaseID);
    const selected = proxyMatcher(request.selector, request.exitIP);
    const matches = (record: ProxyRecord) =>
      selected(record) && (request.within === undefined || request.within(record));
    // A session this replica bound before: its proxy goes first, so the binding is honoured in one trip.
    let bound: ProxyRecord | undefined;
    const hinted = this.sessionHints.get(scopedKey(request.owner, request.session));
    const record = hinted === undefined ? undefined : this.ranking.record(hinted);
    if (record !== undefined && matches(record)) bound = record;
    let gone = '';
    // A session bound (by another replica, or before a restart) to a proxy not sent: send it,
    // or tell the script this replica cannot lease it. Bounded: a binding that keeps changing
    // under us (another replica moving it each time) is an error, not a loop.
    for (let attempt = 0; attempt < 4; attempt++) {
      const outcome = await this.tryAcquire(request, leaseID, bound, gone);
      if (!('need' in outcome)) return outcome;
      const record = this.ranking.record(outcome.need);
      if (record !== undefined && matches(record)) {
        bound = record;
        gone = '';
      } else {
        bound = undefined;
        gone = outcome.need;
      }
    }
    throw new Error(`session ${JSON.stringify(request.session)} kept moving while it was being leased`);
  }

  /**
   * A request refused before is checked first with the refusal script (the book's clock and
   * freed count): while neither a freed slot, a lifted hold nor a catalog change can have
   * made it a grant, the same refusal again, at the cost of that one small script. Else (and
   * the first time) the walk; a refusal then is remembered with the version read before it,
   * bounded from the walk's answer. Identical refusals arriving while such a walk is in
   * flight at the same version take its answer (single flight): one walk per shape at a time
   * on this replica, however many refusers wait.
   */
  private async acquireOrRemembered(request: LeaseRequest, leaseID: string): Promise<AcquireResult> {
    const shape = refusalKey(request);
    const memo = this.refusals.get(shape);
    let version: string | undefined;
    let now: number | undefined;
    if (memo !== undefined) {
      const [at, freed] = (await this.eval('refusal', [])) as [number, string];
      now = Number(at);
      version = `${this.catalogVersion}:${freed}`;
      if (stillRefused(memo, version, now)) return refusalAt(memo, now);
      const walking = shape === undefined ? undefined : this.walks.get(shape);
      if (walking !== undefined && mayShareWalk(true, walking.version, version)) {
        const shared = await walking.answer.catch(sharedFailure);
        if (!shared.granted) return { ...shared };
      }
    }
    const walk = this.walk(request, leaseID, shape, version, now);
    if (shape === undefined || version === undefined) return walk;
    const flight = { version, answer: walk };
    this.walks.set(shape, flight);
    try {
      return await walk;
    } finally {
      if (this.walks.get(shape) === flight) this.walks.delete(shape);
    }
  }

  /** The walk of the ranking for a request without a session; its refusal remembered. */
  private async walk(
    request: LeaseRequest,
    leaseID: string,
    shape: string | undefined,
    version: string | undefined,
    now: number | undefined,
  ): Promise<AcquireResult> {
    const elapsed = this.stopwatch();
    const result = (await this.tryAcquire(request, leaseID)) as AcquireResult & { coolingWaitMs?: number };
    if (result.granted) {
      this.refusals.set(shape, undefined);
      return result;
    }
    const { coolingWaitMs, ...refused } = result;
    // The first refusal has no version read before it: remembered, never answered, until
    // the next one reads it. Cooldowns' ends count from that read: earlier than the walk's,
    // so safe; the bound counts from the answer (that read and the walk's time, measured on
    // one clock).
    const at = now ?? 0;
    this.refusals.set(
      shape,
      rememberRefusal(
        refused,
        version,
        at,
        coolingWaitMs === undefined ? undefined : at + coolingWaitMs,
        at + elapsed(),
      ),
    );
    return refused;
  }

  /** Milliseconds since this call, on the test's clock if one is given, else the monotonic one. */
  private stopwatch(): () => number {
    const clock = this.clock ?? { now: () => performance.now() };
    const started = clock.now();
    return () => clock.now() - started;
  }

  private async tryAcquire(
    request: LeaseRequest,
    leaseID: string,
    bound?: ProxyRecord,
    gone = '',
  ): Promise<AcquireResult | { need: string }> {
    // The owner lives in the keys (lease-owner.ts): the scripts stay owner-blind.
    const session = request.session === undefined ? '' : scopedKey(request.owner, request.session);
    const key = scopedKey(request.owner, leaseID);
    const ttl = String(request.ttlSeconds);
    // The lease key's life (ms): its TTL and a minute, sent so the script formats no number.
    const life = String(Math.ceil(request.ttlSeconds * 1000) + 60_000);
    const target = request.target ?? '';
    const selector = JSON.stringify(request.selector);
    const requested = requestKey('lease', request.owner, request.requestID) ?? '';
    let mode: 'check' | 'moved' | 'none' = request.session === undefined ? 'none' : 'check';
    // What earlier rounds sent (made only when a second round comes): each round walks the
    // ranking afresh, in its order then, and steps over these.
    let sent: Set<string> | undefined;
    let leasable = 0;
    let cooling = 0;
    let firstEnd = -1;
    // A token's scope (token-scope.ts) steps over the proxies outside it, as a skip does.
    const admits = request.within;
    const outside = admits === undefined ? undefined : (id: string) => !admits(this.ranking.record(id)!);
    for (let round = 0; ; round++) {
      const size = CHUNKS[Math.min(round, CHUNKS.length - 1)];
      let chunk: ProxyRecord[];
      if (round === 0 && bound !== undefined) {
        const boundID = bound.id;
        chunk = [
          bound,
          ...this.ranking.candidates(
            request.selector,
            request.exitIP,
            size - 1,
            (id) => id === boundID || outside?.(id) === true,
          ),
        ];
      } else {
        chunk = this.ranking.candidates(
          request.selector,
          request.exitIP,
          size,
          sent === undefined ? outside : (id) => sent!.has(id) || outside?.(id) === true,
        );
      }
      // An empty first chunk still runs when a session may need moving (and to say no_match).
      if (chunk.length === 0 && round > 0) break;
      // The proxy this lease will most likely get counts as taken until the answer says:
      // requests in flight together then rank different proxies first, instead of all
      // sending the same few and missing once those are full.
      if (round === 0 && chunk.length > 0) this.hint(chunk[0].id, this.ranking.load(chunk[0].id) + 1);
      const ranked = rankCandidates(chunk);
      const args = acquireArgs(
        key,
        ttl,
        life,
        target,
        selector,
        ranked,
        recordJSON,
        session,
        mode,
        gone,
        requested,
      );
      const reply = decodeAcquireReply((await this.eval('acquire', args)) as string, ranked);
      if (reply.kind === 'need') return { need: reply.proxyID };
      if (reply.kind === 'dup') return this.replayedGrant(reply.leaseID, reply.value, request.owner);
      if (reply.kind === 'ok') {
        const proxyID = reply.proxyID;
        this.learn(reply.hints);
        this.hint(proxyID, reply.load);
        const lease: Lease = {
          id: leaseID,
          proxyID,
          proxy: reply.proxy,
          selector: { ...request.selector },
          ttlSeconds: request.ttlSeconds,
          acquiredAt: new Date(reply.now),
          expiresAt: new Date(reply.expiresAt),
        };
        if (request.target !== undefined) lease.target = request.target;
        if (request.session !== undefined) lease.session = request.session;
        if (request.owner !== undefined) lease.owner = request.owner;
        const usage = this.usageFrom(reply.load, '', reply.slots, reply.now);
        if (request.session === undefined) return { granted: true, lease, usage };
        this.rememberSession(session, proxyID);
        return {
          granted: true,
          lease,
          usage,
          session: { key: request.session, moved: reply.moved },
        };
      }
      sent ??= new Set();
      for (const record of chunk) sent.add(record.id);
      // 'none': nothing in this chunk could take it; the session's fate is settled.
      leasable += reply.leasable;
      cooling += reply.cooling;
      const wait = reply.waitMs;
      if (wait >= 0 && (firstEnd < 0 || wait < firstEnd)) firstEnd = wait;
      if (mode === 'check') mode = reply.moved ? 'moved' : 'none';
      gone = '';
      this.learn(reply.hints);
      if (chunk.length < size) break;
    }
    const reason = refusal(leasable, cooling);
    // all_busy beside running cooldowns: when the first ends, a proxy may be free (the memo's bound).
    return reason === 'all_cooling_down'
      ? { granted: false, reason, retryAfterMs: Math.max(firstEnd, 0) }
      : { granted: false, reason, ...(firstEnd >= 0 ? { coolingWaitMs: firstEnd } : {}) };
  }

  /** The first grant of a request id (the acquire script's dup answer), as it was granted. */
  private async replayedGrant(
    stored: string,
    value: string,
    owner: string | undefined,
  ): Promise<AcquireResult> {
    const lease = this.owned(decodeLease(unscopedKey(owner, stored), value), owner);
    const [usage] = await this.usage([lease.proxyID]);
    return {
      granted: true,
      lease,
      usage,
      ...(lease.session === undefined ? {} : { session: { key: lease.session, moved: false } }),
      replayed: true,
    };
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
    if (lease.session !== undefined) this.rememberSession(scopedKey(owner, lease.session), lease.proxyID);
    return { lease, usage: this.usageFrom(reply[1], reply[2], reply[3], Number(reply[4])) };
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
    const args = [requested, String(reports.length)];
    for (const { leaseID, result, details = {}, release } of reports) {
      args.push(
        scopedKey(owner, leaseID),
        result,
        details.target ?? NO_TARGET,
        details.retryAfterSeconds === undefined ? '' : String(details.retryAfterSeconds),
        String(this.random()),
        owner ?? '',
        // In-process reports (no owner) are the operator's own: trusted (ban-agreement.ts).
        owner === undefined || details.rotationTrusted === true ? '1' : '0',
        release === true ? '1' : '',
      );
    }
    const raw = (await this.eval('report', args)) as string[];
    // One element more: the first answers of this request key, replayed.
    const replayed = raw.length > reports.length;
    const replies = decodeReportReply(replayed ? raw.slice(0, reports.length) : raw);
    return replies.map((reply, i) => {
      if (reply === undefined) return undefined;
      const lease = this.owned(decodeLease(reports[i].leaseID, reply.value), owner);
      const { target, until, suspect, probe, released } = reply;
      return {
        lease,
        ...(target === '' ? {} : { target }),
        ...(until >= 0 ? { cooldownUntil: new Date(until) } : {}),
        ...(until === CAPPED ? { capped: true as const } : {}),
        ...(suspect >= 0 ? { suspect: suspect === 1, probeRequested: probe === 1 } : {}),
        ...(released >= 0 ? { released: released === 1 } : {}),
        ...(replayed ? { replayed: true as const } : {}),
      };
    });
  }

  async observeHealth(proxyID: string, observation: HealthObservation): Promise<void> {
    const current = this.catalog.get(proxyID);
    // About another address than the proxy's current one: news of a proxy that is gone.
    if (current !== undefined && addressOf(current) !== observation.address) return;
    const suspicion = observation.kind === 'probe_passed' ? observation.suspicion : '';
    await this.eval('observe', [proxyID, observation.kind, observation.address, suspicion]);
  }

  onProbeRequest(listener: ProbeRequestListener): () => void {
    this.listeners.add(listener);
    // Already subscribed: this listener still hears of what was raised before it came.
    if (this.subscriber?.status === 'ready') void this.tellPending([listener]);
    this.subscribe();
    return () => {
      this.listeners.delete(listener);
    };
  }

  async endSession(key: string, owner?: string): Promise<void> {
    const scoped = scopedKey(owner, key);
    this.sessionHints.delete(scoped);
    await this.eval('endSession', [scoped]);
  }

  async usage(proxyIDs: readonly string[]): Promise<ProxyUsage[]> {
    if (proxyIDs.length === 0) return [];
    // Reads only, one script: on Redis's clock, whose time comes back with the data (decision
    // 0024): holds and windows are decoded with it, never with this replica's clock.
    const [now, loads, holds, slots] = (await this.eval('usage', [...proxyIDs])) as [
      number,
      number[],
      string[],
      string[][],
    ];
    const oldest = oldestBucket(now, this.bucketMillis, WINDOW_BUCKETS);
    return proxyIDs.map((id, i) => {
      const activeLeases = Number(loads[i]);
      const record = this.catalog.get(id);
      const held = holdReason(holds[i] || null, record === undefined ? '' : addressOf(record), now);
      this.hint(id, activeLeases);
      return {
        activeLeases,
        stats: { windowSeconds: this.statsWindowSeconds, ...windowCounts(slots[i], oldest) },
        ...(held === undefined ? {} : { held }),
      };
    });
  }

  async standing(proxyID: string): Promise<ProxyStanding> {
    // Reads only, one script on Redis's clock: the usage keys and the proxy's running
    // cooldowns (P:tord) and who reported them (P:rep), with the time they were read at.
    const [rawNow, load, hold, slots, flat, rep] = (await this.eval('standing', [proxyID])) as [
      number,
      number,
      string,
      string[],
      string[],
      string[],
    ];
    const now = Number(rawNow);
    const activeLeases = Number(load);
    const record = this.catalog.get(proxyID);
    const held = holdReason(hold || null, record === undefined ? '' : addressOf(record), now);
    const oldest = oldestBucket(now, this.bucketMillis, WINDOW_BUCKETS);
    const reporters = new Map<string, Map<string, number>>();
    for (let j = 0; j + 1 < rep.length; j += 2) {
      const [field, end] = [rep[j], rep[j + 1]];
      const at = field.lastIndexOf(NUL);
      const target = field.slice(0, at);
      let names = reporters.get(target);
      if (names === undefined) reporters.set(target, (names = new Map()));
      names.set(field.slice(at + 1), Number(end));
    }
    const cooldowns: ProxyCooldown[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const until = Number(flat[i + 1]);
      const agreedOn = agreed(reporters.get(flat[i]) ?? new Map<string, number>(), now);
      // The global pool's key is the empty target (no target is empty: request-parsing.ts).
      cooldowns.push(
        flat[i] === '' ? { until, agreed: agreedOn } : { target: flat[i], until, agreed: agreedOn },
      );
    }
    this.hint(proxyID, activeLeases);
    const usage: ProxyUsage = {
      activeLeases,
      stats: { windowSeconds: this.statsWindowSeconds, ...windowCounts(slots, oldest) },
      ...(held === undefined ? {} : { held }),
    };
    return { usage, cooldowns, now };
  }

  async get(leaseID: string, owner?: string): Promise<Lease | undefined> {
    const reply = (await this.eval('get', [scopedKey(owner, leaseID)])) as string | null;
    return reply === null ? undefined : this.owned(decodeLease(leaseID, reply), owner);
  }

  async totals(): Promise<StoreTotals> {
    // NOW and seven figures, then the proxies that may have live leases.
    const reply = (await this.eval('totals', [])) as unknown[];
    const t = reply.slice(0, 8).map(Number);
    const activeLeases = await this.liveLeases(t[0], reply[8] as string[]);
    return {
      activeLeases,
      activeSessions: t[1],
      activeCooldowns: t[2],
      sessionsEvicted: t[3],
      cooldownsEvicted: t[4],
      suspectProxies: t[5],
      suspicionsRaised: t[6],
      suspicionsExpired: t[7],
    };
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

  /**
   * Loads every script into Redis's script cache (SCRIPT LOAD: idempotent). Done at start and
   * on every (re)connect: a fresh or restarted Redis would answer a call's first EVALSHA
   * NOSCRIPT, a second round trip; and a write sent while Redis is frozen would then be that
   * NOSCRIPT when it resumes, so its retry's request id would find nothing recorded.
   */
  async loadScripts(): Promise<void> {
    for (const script of Object.values(this.scripts))
      await this.guard(() => this.redis.script('LOAD', script.source));
  }

  private readonly preload = (): void => {
    this.loadScripts().catch((err: unknown) =>
      this.logger.debug({ err }, 'could not load the scripts; the first call of each loads it'),
    );
  };

  /** Stops following the catalog and closes the subscriber (a store that is thrown away). */
  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.subscriber?.disconnect();
    this.subscriber = undefined;
  }

  /**
   * Frees Redis memory of ended state (a bounded amount per call) and refreshes the load
   * hints of proxies this replica believes busy (other replicas' releases and expiries).
   * Correctness never waits for it.
   */
  async sweep(): Promise<void> {
    try {
      await this.eval('sweep', []);
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

  /** A proxy's usage from a reply's load, hold reason ('' = none) and raw statistics slots. */
  private usageFrom(load: unknown, hold: unknown, slots: unknown, now: number): ProxyUsage {
    const held = hold === '' ? undefined : (String(hold) as HoldReason);
    return {
      activeLeases: Number(load),
      stats: {
        windowSeconds: this.statsWindowSeconds,
        ...windowCounts(slots as string[], oldestBucket(now, this.bucketMillis, WINDOW_BUCKETS)),
      },
      ...(held === undefined ? {} : { held }),
    };
  }

  private learn(hints: LoadHints): void {
    for (const [proxyID, load] of hints) this.hint(proxyID, load);
  }

  private hint(proxyID: string, load: number): void {
    this.ranking.hint(proxyID, load);
  }

  private rememberSession(key: string, proxyID: string): void {
    this.sessionHints.delete(key);
    this.sessionHints.set(key, proxyID);
    if (this.sessionHints.size > SESSION_HINTS)
      this.sessionHints.delete(this.sessionHints.keys().next().value!);
  }

  private catalogChanged({ before, after }: CatalogChange): void {
    this.catalogVersion++;
    const id = (before ?? after)!.id;
    if (after !== undefined && isLeasable(after)) this.ranking.add(after);
    else this.ranking.delete(id);
    if (after === undefined) this.egressSent.delete(id);
    else this.followEgress(after);
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

  /**
   * Sends the book an egress it has not had from this replica (the first sight included: a
   * replica started after a replacement still brings the news), in the background like the
   * holds' updates; the book decides, by egress.ts's rule, whether cooldowns go.
   */
  private followEgress(record: ProxyRecord): void {
    const seen = egressOf(record);
    if (seen === undefined || this.egressSent.get(record.id) === seen) return;
    this.egressSent.set(record.id, seen);
    this.egressPending.push([record.id, seen]);
    this.egressFlush ??= this.sendEgress();
  }

  /** Sends what is pending, on the next turn (one batch for a burst of changes), until none is. */
  private async sendEgress(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    while (this.egressPending.length > 0 && !this.closed) {
      const pending = this.egressPending;
      this.egressPending = [];
      for (let i = 0; i < pending.length; i += EGRESS_CHUNK) {
        const chunk = pending.slice(i, i + EGRESS_CHUNK);
        try {
          const reply = (await this.eval('egress', [String(chunk.length), ...chunk.flat()])) as unknown[];
          const renewed = reply.slice(1).map(String);
          if (renewed.length > 0)
            this.logger.info(
              { proxyIDs: renewed, cooldowns: Number(reply[0]) },
              'new egress: forgot the cooldowns the old address earned',
            );
        } catch (err) {
          // Sent again with its next change, or by the next replica to start.
          for (const [id] of chunk) this.egressSent.delete(id);
          this.logger.warn({ err }, 'could not tell the shared book of new egresses');
        }
      }
    }
    this.egressFlush = undefined;
  }

  /** Resolves once the egresses this replica has seen are in the book (tests wait for it). */
  async egressSettled(): Promise<void> {
    while (this.egressFlush !== undefined) await this.egressFlush;
  }

  private subscribe(): void {
    if (this.subscriber !== undefined) return;
    // A connection of its own (a subscribed connection runs nothing else), which queues the
    // SUBSCRIBE until it is connected and re-subscribes after every reconnect.
    const subscriber = this.redis.duplicate({
      enableOfflineQueue: true,
      autoResubscribe: true,
      commandTimeout: undefined,
    });
    this.subscriber = subscriber;
    subscriber.on('error', (err: Error) =>
      this.logger.debug({ err }, 'probe-request subscriber: connection error'),
    );
    subscriber.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      let parsed: { proxyID?: unknown; address?: unknown; since?: unknown };
      try {
        parsed = JSON.parse(message) as typeof parsed;
      } catch {
        return;
      }
      if (typeof parsed.proxyID !== 'string' || typeof parsed.address !== 'string') return;
      if (typeof parsed.since !== 'number') return;
      this.tell([...this.listeners], parsed.proxyID, parsed.address, String(parsed.since));
    });
    // A PUBLISH made while this connection was down (a rollout, a new leader, a reconnect) is
    // lost: on every (re)connect, once subscribed, the running suspicions are read and told
    // again. Subscribed first: whatever is raised after the read arrives as a message.
    subscriber.on('ready', () => {
      subscriber
        .subscribe(this.channel)
        .then(() => this.tellPending([...this.listeners]))
        .catch((err: unknown) => {
          this.logger.warn({ err }, 'could not subscribe to probe requests; will retry on reconnect');
        });
    });
  }

  /** Tells these listeners of every suspicion running now (a duplicate is harmless). */
  private async tellPending(listeners: ProbeRequestListener[]): Promise<void> {
    try {
      const flat = ((await this.eval('suspects', [])) as unknown[]).map(String);
      for (let i = 0; i + 2 < flat.length; i += 3) this.tell(listeners, flat[i], flat[i + 1], flat[i + 2]);
      this.pendingTold++;
    } catch (err) {
      // Asked again at the next reconnect; the suspicion's timeout bounds the hold meanwhile.
      this.logger.warn({ err }, 'could not read the running suspicions for the health engine');
    }
  }

  private tell(listeners: ProbeRequestListener[], proxyID: string, address: string, since: string): void {
    for (const listener of listeners) {
      if (!this.listeners.has(listener)) continue;
      try {
        listener(proxyID, address, since);
      } catch (err) {
        this.logger.error({ err }, 'probe-request listener failed');
      }
    }
  }

  /** Whether the probe-request subscription is live and the running suspicions were told (tests wait for it). */
  async subscribed(): Promise<void> {
    this.subscribe();
    const subscriber = this.subscriber!;
    if (subscriber.status !== 'ready')
      await new Promise<void>((resolve) => subscriber.once('ready', () => resolve()));
    await subscriber.subscribe(this.channel);
    while (this.pendingTold === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /**
   * Runs a script: one EVALSHA, its errors as StoreUnavailableError where they mean "not now".
   * A plain promise chain, no async wrappers: each awaited layer costs the acquire and the
   * release a microtask and an allocation.
   */
  private eval(name: ScriptName, args: string[]): Promise<unknown> {
    // A test's clock goes first; without one the scripts read Redis's TIME and take no clock
    // argument (redis-scripts.ts's header: A).
    if (this.clock !== undefined) args.unshift(String(Math.floor(this.clock.now())));
    return this.redis
      .evalsha(this.shas[name], 1, this.countersKey, ...args)
      .then(undefined, (err: unknown) => this.reload(name, args, err));
  }

  /** A restarted Redis has an empty script cache: the source goes once, then EVALSHA again. */
  private reload(name: ScriptName, args: string[], err: unknown): Promise<unknown> {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) return Promise.reject(translate(err));
    return this.redis
      .eval(this.scripts[name].source, 1, this.countersKey, ...args)
      .then(undefined, (e: unknown) => Promise.reject(translate(e)));
  }

  private async guard<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw translate(err);
    }
  }
}

/** Redis errors that mean "not now" rather than a bug in a script. */
const TRANSIENT_REPLIES = [
  'LOADING',
  'BUSY',
  'MASTERDOWN',
  'CLUSTERDOWN',
  'READONLY',
  'TRYAGAIN',
  'OOM',
  'NOREPLICAS',
];

/**
 * ioredis's errors for a command that was written and got no answer: a frozen or slow Redis
 * (the command timeout) or a connection that closed under it. Redis may run it when it
 * catches up. Every other failure (not connected: no offline queue) never sent the command.
 */
const SENT_UNANSWERED = ['Command timed out', 'Connection is closed'];

/**
 * A shared walk's failure, for a request that only waited on it: this request sent nothing
 * that writes (its version read was answered), so whatever the walk's own request may have
 * left applied, this one changed nothing (store_unavailable, never outcome_unknown).
 */
function sharedFailure(err: unknown): never {
  if (err instanceof StoreUnavailableError && err.mayHaveApplied)
    throw new StoreUnavailableError(err.message, err.retryAfterSeconds, { cause: err });
  throw err;
}

function translate(err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return err;
  if (!(err instanceof Error)) return err;
  if (err.name === 'ReplyError' && !TRANSIENT_REPLIES.some((code) => err.message.startsWith(code)))
    return err;
  return new StoreUnavailableError(`lease store unavailable: ${err.message}`, STORE_RETRY_AFTER_SECONDS, {
    cause: err,
    mayHaveApplied: SENT_UNANSWERED.some((text) => err.message.startsWith(text)),
  });
}

/** Records are immutable: each one's JSON is computed once. */
const jsonCache = new WeakMap<ProxyRecord, string>();
/**
 * A record as the book stores it in a lease value: without its credentials (issue 44 item
 * 5): a password never reaches Redis; each replica reads it from its own catalog (owned()).
 */
function recordJSON(record: ProxyRecord): string {
  let json = jsonCache.get(record);
  if (json === undefined) {
    const { credentials: _secret, ...stored } = record;
    json = JSON.stringify(stored);
    jsonCache.set(record, json);
  }
  return json;
}

function holdReason(raw: string | null, address: string, now: number): HoldReason | undefined {
  if (raw === null) return undefined;
  const hold = JSON.parse(raw) as { sa?: string; su?: number; da?: string };
  if (hold.sa === address && (hold.su ?? 0) > now) return 'suspect';
  if (hold.da === address) return 'down';
  return undefined;
}

// The Redis store's acquire: the walk of this replica's ranking in chunks of candidates, one
// acquire script a chunk, until one is granted or every candidate has refused; a session's
// binding honoured (its proxy sent first, or the script told this replica cannot lease it);
// a refusal remembered and answered again cheaply while nothing can have changed it
// (refusal-memo.ts), one walk per refusal shape at a time.

import type { ProxyRecord } from './catalog.js';
import type { HintedRanking } from './hinted-ranking.js';
import { anyLeasable, refusal } from './lease-selection.js';
import type { AcquireResult, Lease, LeaseRequest, ProxyUsage } from './lease-store.js';
import type { Clock } from './clock.js';
import type { Fingerprint } from './fleet-fingerprint.js';
import { scopedKey, unscopedKey } from './lease-owner.js';
import {
  acquireArgs,
  decodeAcquireReply,
  decodeLease,
  rankCandidates,
  unionFigures,
  type CountedBy,
  type LoadHints,
} from './redis-book-codec.js';
import type { ClassFigures } from './redis-fleet-feed.js';
import { usageFrom, type StatsWindow } from './redis-read-replies.js';
import type { RedisSessionHints } from './redis-session-hints.js';
import type { ScriptName } from './redis-scripts.js';
import {
  mayShareWalk,
  RefusalMemos,
  refusalAt,
  refusalKey,
  rememberRefusal,
  stillRefused,
} from './refusal-memo.js';
import { requestKey } from './request-outcomes.js';
import { skipExcluded } from './lease-exclude.js';
import { proxyMatcher } from './selector.js';
import { blockKeys } from './exit-ip-match.js';
import { StoreUnavailableError } from './store-unavailable.js';

/**
 * Candidates sent per round trip: the first chunk is small (the common case: the replica's
 * best-ranked proxy is free), then larger. Each candidate costs the acquire script ~3-7 µs of
 * Redis time (its arguments, three batch reads, the choice); 4 instead of 8 took ~14 µs off
 * the average call (docs/benchmarks.md).
 */
const CHUNKS = [4, 32, 256, 2048];

/** What the walk needs of its store. */
export interface AcquireWalkDeps {
  eval: (name: ScriptName, args: string[]) => Promise<unknown>;
  /** The catalog's leasable proxies with their hinted loads, in ranking order. */
  ranking: HintedRanking;
  sessions: RedisSessionHints;
  window: StatsWindow;
  /** A test's clock; absent: the monotonic one for the walk's own time. */
  clock: Clock | undefined;
  /** Changes of this replica's catalog: a remembered refusal holds only while this does. */
  catalogVersion: () => number;
  /** A stored lease as its owner sees it. */
  owned: (stored: Lease, owner: string | undefined) => Lease;
  usage: (proxyIDs: readonly string[]) => Promise<ProxyUsage[]>;
  /** This replica's fleet fingerprint (redis-fleet-feed.ts): sent so counts may refuse. */
  fleet: () => Fingerprint;
  /**
   * This replica's figures of the classes a request with this selector and scope matches
   * (redis-fleet-feed.ts), sent so their counts may refuse; undefined: too many classes.
   */
  classes: (
    selector: Readonly<Record<string, string>>,
    within: ((proxy: ProxyRecord) => boolean) | undefined,
  ) => ClassFigures[] | undefined;
}

export class RedisAcquireWalk {
  /** Refusals answered again with one small script instead of a walk (refusal-memo.ts). */
  private readonly refusals = new RefusalMemos();
  /** The walk in flight per refusal shape, with the version read before it (single flight). */
  private readonly walks = new Map<string, { version: string; answer: Promise<AcquireResult> }>();

  constructor(private readonly deps: AcquireWalkDeps) {}

  async acquire(request: LeaseRequest, leaseID: string): Promise<AcquireResult> {
    // Without a session the script never answers 'need': one try.
    if (request.session === undefined) return this.acquireOrRemembered(request, leaseID);
    const { ranking } = this.deps;
    const selected = proxyMatcher(request.selector, request.exitIP);
    const matches = (record: ProxyRecord) =>
      selected(record) && (request.within === undefined || request.within(record));
    // A session this replica bound before: its proxy goes first, so the binding is honoured in one trip.
    let bound: ProxyRecord | undefined;
    const hinted = this.deps.sessions.get(scopedKey(request.owner, request.session));
    const record = hinted === undefined ? undefined : ranking.record(hinted);
    if (record !== undefined && matches(record)) bound = record;
    let gone = '';
    // A session bound (by another replica, or before a restart) to a proxy not sent: send it,
    // or tell the script this replica cannot lease it. Bounded: a binding that keeps changing
    // under us (another replica moving it each time) is an error, not a loop.
    for (let attempt = 0; attempt < 4; attempt++) {
      const outcome = await this.tryAcquire(request, leaseID, bound, gone);
      if (!('need' in outcome)) return outcome;
      const record = ranking.record(outcome.need);
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
      const [at, freed] = (await this.deps.eval('refusal', [])) as [number, string];
      now = Number(at);
      version = `${this.deps.catalogVersion()}:${freed}`;
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
    // The owner's quota, not the fleet: nothing to remember for the request's shape.
    if (result.reason === 'lease_quota') return result;
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
    const clock = this.deps.clock ?? { now: () => performance.now() };
    const started = clock.now();
    return () => clock.now() - started;
  }

  private async tryAcquire(
    request: LeaseRequest,
    leaseID: string,
    bound?: ProxyRecord,
    gone = '',
  ): Promise<AcquireResult | { need: string }> {
    // The owner lives in the keys (lease-owner.ts): the scripts read it from a key's prefix
    // only to count the owner's quotas (P:tl, P:tc).
    const session = request.session === undefined ? '' : scopedKey(request.owner, request.session);
    const key = scopedKey(request.owner, leaseID);
    const ttl = String(request.ttlSeconds);
    // The lease key's life (ms): its TTL and a minute, sent so the script formats no number.
    const life = String(Math.ceil(request.ttlSeconds * 1000) + 60_000);
    const target = request.target ?? '';
    const selector = JSON.stringify(request.selector);
    const requested = requestKey('lease', request.owner, request.requestID) ?? '';
    // The owner's quota goes with every chunk: the script judges it before any candidate.
    const quota =
      request.leaseQuota === undefined || request.owner === undefined ? '' : String(request.leaseQuota);
    let mode: 'check' | 'moved' | 'none' = request.session === undefined ? 'none' : 'check';
    // What earlier rounds sent (made only when a second round comes): each round walks the
    // ranking afresh, in its order then, and steps over these.
    let sent: Set<string> | undefined;
    let leasable = 0;
    let cooling = 0;
    let firstEnd = -1;
    // A token's scope (token-scope.ts) steps over the proxies outside it, as a skip does.
    const admits = request.within;
    const scoped = admits === undefined ? undefined : (id: string) => !admits(this.deps.ranking.record(id)!);
    // An excluded proxy too (lease-exclude.ts); those stepped over count in the refusal.
    const excluded = new Set<string>();
    const outside = skipExcluded(scoped, request.exclude, excluded);
    // A request the fleet's counts may refuse whose best-ranked proxy is hinted full: most
    // likely every one is (the least loaded rank first), so the counts go alone first, with
    // no candidate (~15 µs less of Redis than a chunk of four full ones); the walk follows
    // when they do not refuse.
    // A session's request too: its bound proxy is one of the matches the counts cover.
    const counts = this.countedBy(request);
    let counted = false;
    const alone = async (): Promise<AcquireResult | undefined> => {
      counted = true;
      const args = acquireArgs(
        key,
        ttl,
        life,
        target,
        selector,
        [],
        recordJSON,
        '',
        'none',
        '',
        requested,
        counts,
        quota,
      );
      const reply = decodeAcquireReply((await this.deps.eval('acquire', args)) as string, []);
      if (reply.kind === 'quota') return { granted: false, reason: 'lease_quota', held: reply.held };
      if (reply.kind === 'dup') return this.replayedGrant(reply.leaseID, reply.value, request.owner);
      if (reply.kind === 'none' && reply.whole)
        return refusedWith(reply.leasable, reply.cooling, reply.waitMs);
      return undefined;
    };
    if (counts !== undefined) {
      const [best] = this.deps.ranking.candidates(request.selector, request.exitIP, 1, outside);
      if (best !== undefined && this.deps.ranking.load(best.id) >= best.maxLeases) {
        const answer = await alone();
        if (answer !== undefined) return answer;
      }
    }
    for (let round = 0; ; round++) {
      const size = CHUNKS[Math.min(round, CHUNKS.length - 1)];
      let chunk: ProxyRecord[];
      if (round === 0 && bound !== undefined) {
        const boundID = bound.id;
        chunk = [
          bound,
          ...this.deps.ranking.candidates(
            request.selector,
            request.exitIP,
            size - 1,
            (id) => id === boundID || outside?.(id) === true,
          ),
        ];
      } else {
        chunk = this.deps.ranking.candidates(
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
      if (round === 0 && chunk.length > 0) this.hint(chunk[0].id, this.deps.ranking.load(chunk[0].id) + 1);
      const ranked = rankCandidates(chunk);
      // The first chunk of a request whose candidates are every leasable proxy carries the
      // replica's fingerprint, of one with a selector or a scope its classes' ids and their
      // union's figures (two arguments, however many classes): the book's counts may then
      // answer for the rest.
      const whole = round === 0 && counts !== undefined && !counted;
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
        whole ? counts : undefined,
        quota,
      );
      const reply = decodeAcquireReply((await this.deps.eval('acquire', args)) as string, ranked);
      if (reply.kind === 'need') return { need: reply.proxyID };
      if (reply.kind === 'quota') return { granted: false, reason: 'lease_quota', held: reply.held };
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
        const usage = usageFrom(this.deps.window, reply.load, '', reply.slots, reply.now);
        if (request.session === undefined) return { granted: true, lease, usage };
        this.deps.sessions.remember(session, proxyID);
        return {
          granted: true,
          lease,
          usage,
          session: { key: request.session, moved: reply.moved },
        };
      }
      if (reply.whole) {
        // The fleet's counts: the refusal of the whole walk, none of it sent.
        leasable = reply.leasable;
        cooling = reply.cooling;
        firstEnd = reply.waitMs;
        excluded.clear();
        break;
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
    return refusedWith(leasable + excluded.size, cooling, firstEnd);
  }

  /**
   * What this request's refusal may be counted by (redis-book-codec.ts's CountedBy): every
   * leasable proxy its candidate, the fleet's fingerprint; a selector or a scope, the classes
   * they match (at most MAX_COUNTED_CLASSES); an exit IP alone, the fleet's fingerprint and
   * its block's keys (the book's exit sets); an exit IP with a selector or a scope, the
   * classes and the block's keys (the book's by-class exit sets).
   */
  private countedBy(request: LeaseRequest): CountedBy | undefined {
    const block = request.exitIP === undefined ? undefined : blockKeys(request.exitIP);
    const withBlock = block === undefined ? {} : { block };
    if (anyLeasable({ ...request, exitIP: undefined })) return { fleet: this.deps.fleet(), ...withBlock };
    const classes = this.deps.classes(request.selector, request.within);
    if (classes === undefined || classes.length === 0) return undefined;
    // Classes that are every leasable proxy (a scope or a selector admitting all): the fleet's
    // counts, a few commands, instead of a few per class.
    const fleet = this.deps.fleet();
    return unionFigures(classes) === `${fleet.count} ${fleet.a} ${fleet.b}`
      ? { fleet, ...withBlock }
      : { classes, ...withBlock };
  }

  /** The first grant of a request id (the acquire script's dup answer), as it was granted. */
  private async replayedGrant(
    stored: string,
    value: string,
    owner: string | undefined,
  ): Promise<AcquireResult> {
    const lease = this.deps.owned(decodeLease(unscopedKey(owner, stored), value), owner);
    const [usage] = await this.deps.usage([lease.proxyID]);
    return {
      granted: true,
      lease,
      usage,
      ...(lease.session === undefined ? {} : { session: { key: lease.session, moved: false } }),
      replayed: true,
    };
  }

  private learn(hints: LoadHints): void {
    for (const [proxyID, load] of hints) this.hint(proxyID, load);
  }

  private hint(proxyID: string, load: number): void {
    this.deps.ranking.hint(proxyID, load);
  }
}

/** The refusal of leasable candidates, cooling of them, the first cooldown ending in firstEnd ms (-1: none). */
function refusedWith(
  leasable: number,
  cooling: number,
  firstEnd: number,
): AcquireResult & { coolingWaitMs?: number } {
  const reason = refusal(leasable, cooling);
  // all_busy beside running cooldowns: when the first ends, a proxy may be free (the memo's bound).
  return reason === 'all_cooling_down'
    ? { granted: false, reason, retryAfterMs: Math.max(firstEnd, 0) }
    : { granted: false, reason, ...(firstEnd >= 0 ? { coolingWaitMs: firstEnd } : {}) };
}

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

// The lease store contract. Promise-returning throughout so that a shared (CRD- or
// Redis-backed) store can replace the in-memory one without touching its two doors (the
// HTTP API and the gateway). A store reads proxies from the ProxyCatalog it was built with.
import type { ProxyRecord } from './catalog.js';
import type { ExitIPTerm } from './exit-ip-match.js';

export interface LeaseRequest {
  /** Attribute equality filter; empty matches every proxy. */
  selector: Record<string, string>;
  /** Only proxies whose exit IP (status.exitIP) is this address or in this CIDR block. */
  exitIP?: ExitIPTerm;
  ttlSeconds: number;
  /** The site the client will crawl; absent means the global pool. Already normalized. */
  target?: string;
  /** Sticky-session key: leases in one session go to the same proxy while it stays leasable. */
  session?: string;
  /**
   * Proxy ids (namespace/name) not to give (lease-exclude.ts): skipped as candidates. Every
   * match excluded (or the rest full) is all_busy, the rest cooling all_cooling_down. Not for a
   * session's request (the API refuses both together): its bound proxy is not checked for it.
   * A refusal of a request with an exclusion is never remembered nor answered from memory.
   */
  exclude?: ReadonlySet<string>;
  /**
   * The API token's name that asks (see lease-owner.ts). The lease belongs to it: renew,
   * release, report and get by another owner act as if the lease did not exist, and session
   * keys are per owner (two owners' "s1" are two sessions). Undefined is an owner of its own.
   */
  owner?: string;
  /**
   * The asking token's scope (token-scope.ts): only proxies it admits are leased, a session
   * bound to one outside it moves. Absent: every proxy. It answers from the proxy's
   * namespace and attributes alone, the same for as long as it lives (scopeMatcher's,
   * compiled once per token policy, does): a store may ask it of one proxy per class, keep
   * the answer and take it for all of them (proxy-classes.ts).
   */
  within?: (proxy: ProxyRecord) => boolean;
  /**
   * The client's request id (the API's Idempotency-Key), per owner: a grant is recorded with
   * it, atomically with the lease, and a repeat gets that first grant back (`replayed`)
   * instead of a second lease. A refusal records nothing (it changed nothing).
   */
  requestID?: string;
  /**
   * The most live leases `owner` may hold (its quota, tenant-quotas.ts): at it the request is
   * refused `lease_quota` and nothing is leased. Judged by the store, atomically with the
   * grant, over every lease the owner holds in the book (a shared store: through every
   * replica and both doors). Absent, or no owner: no quota.
   */
  leaseQuota?: number;
}

export interface Lease {
  id: string;
  proxyID: string;
  /** The proxy as it was when leased: what a lease on a since-deleted proxy still shows. */
  proxy: ProxyRecord;
  selector: Record<string, string>;
  target?: string;
  session?: string;
  /** The token name that took it (LeaseRequest.owner). */
  owner?: string;
  ttlSeconds: number;
  acquiredAt: Date;
  expiresAt: Date;
}

export type NoLeaseReason = 'no_match' | 'all_busy' | 'all_cooling_down';

export interface SessionOutcome {
  key: string;
  /** True when the session was bound to another proxy that stopped being leasable. */
  moved: boolean;
}

export type AcquireResult =
  | {
      granted: true;
      lease: Lease;
      usage: ProxyUsage;
      session?: SessionOutcome;
      /** A repeat of a request id that was granted before: this is that first grant. */
      replayed?: true;
    }
  /** `retryAfterMs` (all_cooling_down only): until the first matching proxy's cooldown for the target ends. */
  | { granted: false; reason: NoLeaseReason; retryAfterMs?: number }
  /** The owner holds its `leaseQuota` of live leases (`held`, as the store counted them). */
  | { granted: false; reason: 'lease_quota'; held: number; retryAfterMs?: never };

export interface RenewResult {
  lease: Lease;
  usage: ProxyUsage;
  /** A repeat of a request id: the first renewal's lease, extended no further. */
  replayed?: true;
}

/**
 * What using a lease's proxy taught the client: `ok`; `banned` (the target refused this
 * proxy: a long, doubling cooldown for that target); `rate_limited` (the target asked it to
 * slow down: a short cooldown of its own); `unreachable` (the proxy itself could not carry
 * the request: refused, reset, timed out connecting, or a CONNECT it answered with a non-2xx):
 * the proxy becomes suspect, leased to nobody until the health engine has probed it again.
 */
export type ReportResult = 'ok' | 'rate_limited' | 'banned' | 'unreachable';
export const REPORT_RESULTS: readonly ReportResult[] = ['ok', 'rate_limited', 'banned', 'unreachable'];

export interface ReportDetails {
  /** Overrides the lease's own target. Already normalized. */
  target?: string;
  /** A rate_limited response's Retry-After, in seconds: that cooldown lasts at least this long. */
  retryAfterSeconds?: number;
  /**
   * The reporting token is trusted for rotation on bans (ban-agreement.ts): its cooldown
   * counts toward spec.rotation.whenCoolingDownOn alone. A report without an owner (in-process)
   * is trusted whatever this says.
   */
  rotationTrusted?: boolean;
  /**
   * The most (proxy, target) cooldowns the reporting owner's reports may keep running (its
   * quota, tenant-quotas.ts): a banned/rate_limited report that would start one more refuses
   * the whole call, nothing recorded (CooldownQuotaRefusal). Judged by the store over every
   * cooldown the owner's reports started or extended (a shared store: through every replica
   * and both doors). Absent, or no owner: no quota.
   */
  cooldownQuota?: number;
}

/**
 * A report call refused by its owner's cooldown quota (ReportDetails.cooldownQuota): nothing
 * of it was recorded. `index`: the first report beyond the quota.
 */
export class CooldownQuotaRefusal extends Error {
  constructor(readonly index: number) {
    super(`report ${index} would start a cooldown beyond its owner's cooldown quota`);
    this.name = 'CooldownQuotaRefusal';
  }
}

export interface ReportOutcome {
  lease: Lease;
  /** The cooldown key the report applied to: a target, or undefined for the global pool. */
  target?: string;
  /** When the cooldown ends, if the report started or extended one (ok and unreachable never do). */
  cooldownUntil?: Date;
  /**
   * The report started the cooldown: none ran for its proxy and target (absent: it extended a
   * running one, or started none). What the cooldowns counter counts: proxies benched, not reports.
   */
  cooldownStarted?: true;
  /** unreachable only: whether the proxy is suspect now (false: the report was not believed). */
  suspect?: boolean;
  /** unreachable only: whether this report asked the health engine for an out-of-schedule probe. */
  probeRequested?: boolean;
  /**
   * banned/rate_limited only: the target was not recorded because the book is at a cap and
   * every cooldown there still runs (eviction never lifts a running cooldown). The report
   * still counts in the proxy's statistics.
   */
  capped?: true;
  /** The report asked for the release of its lease (BatchReport.release): whether it ended it. */
  released?: boolean;
  /** A repeat of a request id: the first outcome, recorded nothing again. */
  replayed?: true;
}

/** One report of LeaseStore.reportMany. */
export interface BatchReport {
  leaseID: string;
  result: ReportResult;
  details?: ReportDetails;
  /** Ends the lease once its report is recorded (in the same atomic step). */
  release?: boolean;
}

/**
 * Request ids (Idempotency-Key) a client may send: what a store keeps per owner. Outcomes
 * are kept this long: far longer than any client retries a call it got no answer to.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
export const REQUEST_RETENTION_MILLIS = 15 * 60_000;

/** Report counts by result. */
export interface OutcomeCounts {
  ok: number;
  banned: number;
  rate_limited: number;
  unreachable: number;
}

/** Report counts over the store's sliding window. */
export interface OutcomeStats extends OutcomeCounts {
  windowSeconds: number;
}

/** What the store knows about one proxy's use. */
export interface ProxyUsage {
  activeLeases: number;
  stats: OutcomeStats;
  /**
   * Why the book keeps a proxy out of every lease, ahead of its status: `suspect` (an
   * unreachable report awaits a probe) or `down` (the health engine's verdict is unhealthy).
   * Absent when the book has nothing against it.
   */
  held?: HoldReason;
}

export type HoldReason = 'suspect' | 'down';

/** A running cooldown of one proxy, as a lease store reports it. */
export interface ProxyCooldown {
  /** The target it benches the proxy for; undefined = the global pool (leases naming no target). */
  target?: string;
  /** When it ends (ms since the epoch). */
  until: number;
  /** Another team's target (target-privacy.ts): the target is not shown, only that one runs. */
  hidden?: true;
  /**
   * Whether the reports behind it agree (ban-agreement.ts): what rotation on bans counts.
   * Stores always say; absent (a hand-made reading) counts as agreed.
   */
  agreed?: boolean;
  /**
   * The tokens whose reports keep it running (at most MAX_REPORTERS, the trusted mark left
   * out; absent: none): the book's, so every replica tells a team its own target alike
   * (target-privacy.ts). Never sent to a client.
   */
  reporters?: readonly string[];
}

/** See LeaseStore.standing. */
export interface ProxyStanding {
  usage: ProxyUsage;
  cooldowns: ProxyCooldown[];
  /** The store's clock at the reading (ms since the epoch). */
  now: number;
}

/**
 * What the health engine learnt about a proxy at an address, handed to the book as it
 * happens (the Proxy's status follows later, and not at all while the API server is away).
 * An observation about another address than the proxy's current one is ignored.
 */
export type HealthObservation =
  /**
   * A recheck asked for `suspicion` (the token its probe request carried) passed: ends that
   * suspicion, not a later one. A token, not a time: the engine's clock is not the book's.
   */
  | { kind: 'probe_passed'; address: string; suspicion: string }
  /** The verdict turned unhealthy: held out of every lease until `up` or another address. */
  | { kind: 'down'; address: string }
  /** The verdict turned healthy: the Proxy's status decides again. */
  | { kind: 'up'; address: string };

/**
 * Called with each proxy an unreachable report made suspect: its id, the address reported,
 * and the suspicion's token (what a passing recheck hands back in `probe_passed`).
 */
export type ProbeRequestListener = (proxyID: string, address: string, suspicion: string) => void;

/** Gauges and counters for the metrics endpoint. */
export interface StoreTotals {
  activeLeases: number;
  activeSessions: number;
  activeCooldowns: number;
  /** Sessions forgotten because the session cap was reached (monotonic). */
  sessionsEvicted: number;
  /** (proxy, target) cooldown entries forgotten at their caps (monotonic). */
  cooldownsEvicted: number;
  /** Proxies held out of leases right now because an unreachable report awaits a probe. */
  suspectProxies: number;
  /** Proxies made suspect by an unreachable report (monotonic). */
  suspicionsRaised: number;
  /** Suspicions that ended without a probe answering them within the bound (monotonic). */
  suspicionsExpired: number;
}

/**
 * Every store follows its catalog: besides health, drains and attributes, a record whose
 * egress changed (egress.ts: a replacement on a new address) makes the store forget that
 * proxy's cooldowns and streaks; a shared store may apply that in the background.
 */
export interface LeaseStore {
  /**
   * Chooses a proxy from the catalog and leases it, atomically with respect to every other
   * call: no proxy ever exceeds its maxLeases, and a session is bound to one proxy at a time.
   */
  acquire(request: LeaseRequest): Promise<AcquireResult>;
  /**
   * Extends a live lease to now + ttlSeconds (default: its original TTL); never shortens it.
   * Resolves undefined when the lease is unknown, expired, released or another owner's.
   */
  renew(
    leaseID: string,
    ttlSeconds?: number,
    owner?: string,
    requestID?: string,
  ): Promise<RenewResult | undefined>;
  /**
   * Ends a lease early. Resolves true when it ended this owner's live lease; false when the
   * lease is unknown, ended already or another owner's (which stays live).
   */
  release(leaseID: string, owner?: string, requestID?: string): Promise<boolean>;
  /**
   * Records the outcome of using a lease's proxy. Resolves undefined when the lease is
   * unknown, expired or released. `unreachable` makes the proxy suspect (see ReportOutcome)
   * and, unless it is suspect already, asks the health engine for a probe (onProbeRequest).
   * With a requestID, a repeat of this (lease, request id) gets the first outcome and records
   * nothing again (a retried ban is one ban); so do renew and release.
   */
  report(
    leaseID: string,
    result: ReportResult,
    details?: ReportDetails,
    owner?: string,
    requestID?: string,
  ): Promise<ReportOutcome | undefined>;
  /**
   * Records several reports (and the releases they ask for) as one atomic step, in order:
   * every one of them or, when the store fails, none. Element i answers report i (undefined:
   * its lease is unknown, expired, released or another owner's; nothing to record). A repeat
   * of the request id gets the first answers, recording nothing again.
   */
  reportMany(
    reports: readonly BatchReport[],
    owner?: string,
    requestID?: string,
  ): Promise<(ReportOutcome | undefined)[]>;
  /** The health engine's news about a proxy (see HealthObservation). */
  observeHealth(proxyID: string, observation: HealthObservation): Promise<void>;
  /**
   * Subscribes to probe requests raised by unreachable reports, from every replica sharing
   * this book: the seam through which the health engine (the leader's) hears of them. A new
   * listener also hears, soon after subscribing, of every suspicion still running (raised
   * while nobody listened), and a shared store tells its listeners again after every
   * reconnect: a request is never lost to a gap, and may come twice (harmless).
   * Returns the unsubscribe function.
   */
  onProbeRequest(listener: ProbeRequestListener): () => void;
  /** Forgets a session's binding (this owner's session of that key); its leases stay valid. Idempotent. */
  endSession(key: string, owner?: string): Promise<void>;
  /**
   * Live leases and recent report counts, for many proxies in one call (one round trip):
   * element i is proxy `proxyIDs[i]`'s. An array, not a map: a list page asks for 200 at a
   * time, and a map of 200 entries is most of the page's garbage (docs/benchmarks.md).
   */
  usage(proxyIDs: readonly string[]): Promise<ProxyUsage[]>;
  /**
   * One proxy's usage and its running cooldowns (every target), read at once, with the
   * store's time of the reading: what GET /v1/proxies/{namespace}/{name} explains.
   */
  standing(proxyID: string): Promise<ProxyStanding>;
  /** A live lease, or undefined when unknown, expired or released. */
  get(leaseID: string, owner?: string): Promise<Lease | undefined>;
  totals(): Promise<StoreTotals>;
  /** Starts the background loop that frees memory. */
  start(): Promise<void>;
  /** Stops the background loop. */
  stop(): Promise<void>;
  /**
   * A shared store only: counts one failed authentication from `address` for every replica
   * (a token bucket of `burst`, refilled at `ratePerSecond`; every failure costs one). Resolves
   * the ms until the address may fail again (0: now); rejects when the book cannot be reached
   * (the caller's own count then stands alone). Absent: each process counts alone.
   */
  countFailedAuth?(address: string, ratePerSecond: number, burst: number): Promise<number>;
}

// The discovery API's JSON shapes, as the server sends and accepts them. A test holds these
// against the server's /openapi.json (property names, which are required, enums), so a
// change on either side fails the build instead of a crawler in production.

/** Attribute equality filter / attribute map: `{ geo: 'eu' }`. */
export type Attributes = Record<string, string>;

/** The stable codes of every non-2xx answer's `error` field. */
export type ApiErrorCode =
  | 'invalid_request'
  | 'invalid_json'
  | 'unauthorized'
  | 'not_found'
  | 'lease_not_found'
  | 'proxy_not_found'
  | 'method_not_allowed'
  | 'no_match'
  | 'all_busy'
  | 'all_cooling_down'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'headers_too_large'
  | 'request_timeout'
  | 'store_unavailable'
  | 'outcome_unknown'
  | 'too_many_requests'
  | 'lease_quota'
  | 'cooldown_quota'
  | 'report_quota'
  | 'book_queue_full'
  | 'internal';

/** The 409 codes of POST /v1/leases: why nothing was leased. */
export type NoLeaseCode = 'no_match' | 'all_busy' | 'all_cooling_down';

/**
 * How a proxy fared: `ok`; `banned` by the target (a long rest for that target);
 * `rate_limited` by the target (a short rest, at least `retryAfterSeconds`); `unreachable`:
 * the proxy itself could not carry the request (refused, reset, timed out connecting, a
 * CONNECT answered with a non-2xx): leased to nobody until a probe has passed again.
 */
export type ReportResult = 'ok' | 'banned' | 'rate_limited' | 'unreachable';

/** Why the lease book holds a proxy out of every lease ahead of its status. */
export type HoldReason = 'suspect' | 'down';

/** Every non-2xx body. */
export interface ApiErrorBody {
  error: ApiErrorCode;
  message: string;
}

/** Report counts over a sliding window, all targets together. */
export interface ProxyStats {
  windowSeconds: number;
  ok: number;
  banned: number;
  rate_limited: number;
  unreachable: number;
}

/** The fields every proxy view shares. */
export interface ProxyFields {
  /** `namespace/name` of the Proxy resource: stable across replacements, unlike the IP. */
  id: string;
  /** Empty until the proxy has an address. */
  ip: string;
  port: number;
  attributes: Attributes;
  phase: string;
  healthy: boolean;
  latencyMillis: number;
  /**
   * The egress address target sites see, as the operator last read it through the proxy
   * (spec.healthCheck.exitIPURL); absent when not read.
   */
  exitIP?: string;
  activeLeases: number;
  /** 0 = listed but never leased. */
  maxLeases: number;
}

/** A list item of GET /v1/proxies (and the fields of GET /v1/proxies/{namespace}/{name}). */
export interface Proxy extends ProxyFields {
  stats: ProxyStats;
  /** Present while the lease book holds the proxy out of every lease (suspect or down). */
  held?: HoldReason;
}

/** A reason against leasing a proxy (GET /v1/proxies/{namespace}/{name}). */
export type NotLeasableCode =
  | 'deleting'
  | 'draining'
  | 'leases_disabled'
  | 'no_address'
  | 'unhealthy'
  | 'suspect'
  | 'full'
  | 'cooling_down';

/** A running cooldown: the proxy is benched for `target` (null: the global pool) until `until`. */
export interface Cooldown {
  /** null: the global pool, or (hidden) another token's target. */
  target: string | null;
  /** ISO 8601. */
  until: string;
  /** Another token's target: only that the proxy cools down for some site is shown. */
  hidden?: true;
}

/** One reason against leasing a proxy; `message` says it in words. */
export type NotLeasableReason =
  | { code: 'deleting' | 'draining' | 'leases_disabled' | 'no_address' | 'suspect'; message: string }
  | { code: 'unhealthy'; healthReason: string | null; phase: string; message: string }
  | { code: 'full'; activeLeases: number; maxLeases: number; message: string }
  /** A cooldown keeps the proxy only from leases for its own target. */
  | { code: 'cooling_down'; cooldowns: Cooldown[]; message: string };

/** The answer of GET /v1/proxies/{namespace}/{name}: the proxy and why it is (not) leased. */
export interface ProxyDetail extends Proxy {
  /** Whether a lease for `target` could be given this proxy now (its selector aside). */
  leasable: boolean;
  /** The target `leasable` is for; null = a lease naming none. */
  target: string | null;
  /** Every reason against leasing it, in a fixed order; cooling_down may come with leasable true. */
  reasons: NotLeasableReason[];
}

/** The proxy inside a lease: ready to use through `url`. */
export interface LeasedProxy extends Proxy {
  /**
   * `http://ip:port`, or `http://user:pass@ip:port` when the proxy requires credentials: ready
   * to hand to an HTTP client as its proxy (undici's ProxyAgent, got, Crawlee read the userinfo).
   * It carries a secret: do not log it.
   */
  url: string;
  /** The proxy's basic-auth credentials, also in `url`; absent when it requires none. */
  username?: string;
  password?: string;
}

/** Present on a lease iff the request named a session. */
export interface LeaseSession {
  key: string;
  /** True when the session was bound to another proxy that stopped being leasable. */
  moved: boolean;
}

/** The answer of POST /v1/leases (201) and POST /v1/leases/{id}/renew (200). */
export interface Lease {
  leaseID: string;
  proxy: LeasedProxy;
  /** RFC 3339 date-time. */
  expiresAt: string;
  /** The lease's cooldown key, lower-cased; null = the global pool. */
  target: string | null;
  session?: LeaseSession;
}

/** The body of POST /v1/leases. */
export interface LeaseRequest {
  /** Attribute equality filter; default {} (any proxy). */
  selector?: Attributes;
  /**
   * Only a proxy whose exit IP is this address or in this CIDR block (e.g. "203.0.113.0/24",
   * "2001:db8::/32"); a proxy whose exit IP is not known never matches.
   */
  exitIP?: string;
  /** Default 300 on the server; at most its --max-lease-ttl. */
  ttlSeconds?: number;
  /** The site the proxy will be used against (a host name). */
  target?: string;
  /** Sticky-session key: 1..128 of [A-Za-z0-9._:@-]. */
  session?: string;
  /**
   * Proxy ids (namespace/name, as `proxy.id`) not to give, at most 100: a grant is another
   * proxy, every match excluded is `all_busy`. Not with `session`. An operator older than
   * this field answers 400 invalid_request "unknown field(s) 'exclude'".
   */
  exclude?: string[];
}

/** The body of POST /v1/leases/{id}/renew. */
export interface RenewRequest {
  /** Default: the lease's original TTL. */
  ttlSeconds?: number;
}

/** The body of POST /v1/leases/{id}/report. */
export interface ReportRequest {
  result: ReportResult;
  /** Overrides the lease's own target. */
  target?: string;
  /** rate_limited only: the response's Retry-After in seconds (0..86400). */
  retryAfterSeconds?: number;
  /** End the lease once the report is recorded: a last report and the release in one call. */
  release?: boolean;
}

/** The answer of POST /v1/leases/{id}/report. */
export interface ReportResponse {
  leaseID: string;
  proxyID: string;
  result: ReportResult;
  /** The cooldown key used; null = the global pool. */
  target: string | null;
  /** null when no cooldown started (ok, unreachable). */
  cooldownUntil: string | null;
  /** unreachable only: true when the proxy is held out as suspect; false when the report was not believed. */
  suspect?: boolean;
  /** True when the store's caps were full of running cooldowns and this report could start none. */
  capped?: boolean;
  /** Present when the request asked for `release`: the lease has ended. */
  released?: true;
}

/** One report of POST /v1/reports: a report naming its lease. */
export interface BatchedReport extends ReportRequest {
  leaseID: string;
}

/**
 * A report of a batch whose lease the server no longer knows (expired, released, never
 * issued), or that would start a cooldown past the token's quota (nothing recorded).
 */
export interface BatchedReportNotFound {
  leaseID: string;
  error: 'lease_not_found' | 'cooldown_quota';
  message: string;
}

/** The answer of POST /v1/reports: each report's answer, in the request's order. */
export interface ReportsResponse {
  items: (ReportResponse | BatchedReportNotFound)[];
}

/** GET /v1/proxies answers `{items}`. */
export interface ProxyList {
  items: Proxy[];
  /** Another page follows: pass this back as the `continue` query parameter. */
  continue?: string;
}

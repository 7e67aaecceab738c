// A typed client for the proxy-operator discovery API, on undici.
import { randomUUID } from 'node:crypto';
import { Agent, request, type Dispatcher } from 'undici';
import { backoffDelayMs, sleep, type BackoffOptions } from './backoff.js';
import { DiscoveryApiError, DiscoveryTimeoutError, DiscoveryTransportError, isLeaseGone } from './errors.js';
import type {
  ApiErrorBody,
  Attributes,
  Lease,
  LeaseRequest,
  Proxy,
  ProxyDetail,
  ProxyList,
  RenewRequest,
  BatchedReport,
  ReportRequest,
  ReportResponse,
  ReportResult,
  ReportsResponse,
} from './types.js';

/** The most reports POST /v1/reports takes in one call (the server's cap). */
export const MAX_BATCH_REPORTS = 100;

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_TOO_MANY_REQUESTS_RETRIES = 3;
export const DEFAULT_UNAVAILABLE_RETRIES = 3;
/** A 503 answer's codes: the lease store failed; the call is worth sending again. */
const UNAVAILABLE_CODES: readonly string[] = ['store_unavailable', 'outcome_unknown'];
/** Refusals before the call did anything: waited out with the rate limit's retries. */
const THROTTLED_CODES: readonly string[] = ['too_many_requests', 'book_queue_full'];
/** A Retry-After longer than this is not waited for: the call throws too_many_requests. */
const MAX_TOO_MANY_REQUESTS_WAIT_SECONDS = 60;

export interface DiscoveryClientOptions {
  /** Where the API is served, e.g. `http://proxy-operator-discovery.proxy-operator-system:8090`. */
  baseUrl: string;
  /** The bearer token (the operator's DISCOVERY_TOKEN); omit when the API runs without auth. */
  token?: string;
  /** Default per-call timeout: connect, headers and body together. Default 10,000 ms. */
  timeoutMs?: number;
  /** Retry `lease()` on `all_busy` with jittered exponential backoff. Default: no retry. */
  retryAllBusy?: BackoffOptions | false;
  /** undici dispatcher (connection pool, TLS options). Default: undici's global dispatcher. */
  dispatcher?: Dispatcher;
  /**
   * PEM CA certificate(s) an `https` baseUrl's certificate must chain to (the operator's
   * --discovery-tls-cert signed by a private CA). Not with `dispatcher` (give that one the CA).
   */
  ca?: string | Buffer;
  /**
   * A call the server refused with `429 too_many_requests` (the token's rate limit, or its
   * lists in flight) or `429 book_queue_full` (too many of its token's calls wait for the
   * lease book; nothing of the call was applied) is sent again after the answer's Retry-After, at most this many times;
   * 0 throws at once. Safe for every call: the server refuses before doing anything. Default 3.
   */
  tooManyRequestsRetries?: number;
  /**
   * A call answered `503` (`store_unavailable`, or `outcome_unknown`: the lease store got the
   * write and did not answer in time) is sent again after the answer's Retry-After, at most
   * this many times; 0 throws at once. Safe for writes: each write carries one request id
   * (`Idempotency-Key`) through all its attempts, so the server applies it once and a retry
   * gets the first outcome (one lease, one ban). Default 3.
   */
  unavailableRetries?: number;
}

export interface CallOptions {
  /** Cancels the call; it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's timeout for this call (for `lease`, per attempt). */
  timeoutMs?: number;
  /**
   * A write's request id (`Idempotency-Key`, 1-128 of letters, digits and . _ : -). Default:
   * a new UUID per call, kept through the call's own retries. Give the same one to a call made
   * again after it failed without an answer (a timeout, a lost connection) to get its first
   * outcome instead of a second write.
   */
  requestID?: string;
}

export interface LeaseCallOptions extends CallOptions {
  /** Overrides the client's `retryAllBusy` for this call. */
  retryAllBusy?: BackoffOptions | false;
}

export interface ListOptions {
  /** Keep proxies whose attributes hold every given key with exactly that value. */
  selector?: Attributes;
  /** Only healthy (true) or only unhealthy (false) proxies; absent = both. */
  healthy?: boolean;
  /** Only proxies whose exit IP is this address or in this CIDR block (unknown: never), as a lease's. */
  exitIP?: string;
  /** Proxies per page (1-1000; the server's default is 200). listProxies follows every page. */
  pageSize?: number;
}

/** A proxy's id (`namespace/name`) or its two parts. */
export type ProxyRef = string | { namespace: string; name: string };

type Method = 'GET' | 'POST' | 'DELETE';

export class DiscoveryClient {
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly tooManyRequestsRetries: number;
  private readonly unavailableRetries: number;

  private readonly dispatcher?: Dispatcher;

  constructor(private readonly options: DiscoveryClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`baseUrl must be an absolute http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    if (options.ca !== undefined) {
      if (options.dispatcher !== undefined)
        throw new TypeError('ca and dispatcher are exclusive: give the dispatcher the CA');
      if (url.protocol !== 'https:')
        throw new TypeError(`ca is for an https baseUrl, got ${JSON.stringify(options.baseUrl)}`);
      this.dispatcher = new Agent({ connect: { ca: options.ca } });
    } else {
      this.dispatcher = options.dispatcher;
    }
    this.timeoutMs = positive('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    this.tooManyRequestsRetries = retries(
      'tooManyRequestsRetries',
      options.tooManyRequestsRetries ?? DEFAULT_TOO_MANY_REQUESTS_RETRIES,
    );
    this.unavailableRetries = retries(
      'unavailableRetries',
      options.unavailableRetries ?? DEFAULT_UNAVAILABLE_RETRIES,
    );
  }

  /**
   * GET /v1/proxies: proxies matching the selector (and health), sorted by id, following the
   * `continue` token page by page (a proxy added or removed meanwhile may be missed or seen).
   */
  async listProxies(query: ListOptions = {}, options: CallOptions = {}): Promise<Proxy[]> {
    const items: Proxy[] = [];
    for await (const page of this.proxyPages(query, options)) items.push(...page);
    return items;
  }

  /** The pages of GET /v1/proxies, one request each: for fleets too large to hold at once. */
  async *proxyPages(query: ListOptions = {}, options: CallOptions = {}): AsyncGenerator<Proxy[]> {
    let next: string | undefined;
    do {
      const params = new URLSearchParams();
      if (query.healthy !== undefined) params.set('healthy', String(query.healthy));
      if (query.exitIP !== undefined) params.set('exitIP', query.exitIP);
      for (const [key, value] of Object.entries(query.selector ?? {})) params.set(`attr.${key}`, value);
      if (query.pageSize !== undefined) params.set('limit', String(query.pageSize));
      if (next !== undefined) params.set('continue', next);
      const search = params.size > 0 ? `?${params}` : '';
      const list = await this.call<ProxyList>('GET', `/v1/proxies${search}`, undefined, options);
      yield list.items;
      next = list.continue;
    } while (next !== undefined);
  }

  /**
   * GET /v1/proxies/{namespace}/{name}[?target=]: the proxy, whether it is leasable now (for
   * `target`, or a lease naming none) and every reason it is not; a missing proxy throws
   * `proxy_not_found`.
   */
  async getProxy(proxy: ProxyRef, options: CallOptions & { target?: string } = {}): Promise<ProxyDetail> {
    const { namespace, name } = typeof proxy === 'string' ? splitProxyID(proxy) : proxy;
    const { target, ...call } = options;
    const query = target === undefined ? '' : `?target=${encodeURIComponent(target)}`;
    return this.call<ProxyDetail>(
      'GET',
      `/v1/proxies/${seg(namespace)}/${seg(name)}${query}`,
      undefined,
      call,
    );
  }

  /**
   * POST /v1/leases. Nothing leasable throws a DiscoveryApiError with code `no_match`,
   * `all_busy` or `all_cooling_down` (see `isNoLease`); `all_busy` is retried first when
   * `retryAllBusy` is set.
   */
  async lease(body: LeaseRequest = {}, options: LeaseCallOptions = {}): Promise<Lease> {
    const retry = options.retryAllBusy ?? this.options.retryAllBusy ?? false;
    // One request id for every attempt: a refusal recorded nothing, a grant answers again.
    const once = { ...options, requestID: options.requestID ?? randomUUID() };
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.call<Lease>('POST', '/v1/leases', body, once);
      } catch (err) {
        if (!retry || attempt >= retry.retries || !(err instanceof DiscoveryApiError)) throw err;
        if (err.code !== 'all_busy') throw err;
        await sleep(backoffDelayMs(attempt, retry), options.signal);
      }
    }
  }

  /** POST /v1/leases/{id}/renew: a new expiry (default: the original TTL from now). */
  async renew(leaseID: string, body: RenewRequest = {}, options: CallOptions = {}): Promise<Lease> {
    return this.call<Lease>('POST', `/v1/leases/${seg(leaseID)}/renew`, body, options);
  }

  /**
   * DELETE /v1/leases/{id}. Idempotent here: the server's 404 lease_not_found (a lease that
   * ended already, or is not this token's) resolves too, as the lease is not held either way.
   */
  async release(leaseID: string, options: CallOptions = {}): Promise<void> {
    try {
      await this.call<undefined>('DELETE', `/v1/leases/${seg(leaseID)}`, undefined, options);
    } catch (err) {
      if (!isLeaseGone(err)) throw err;
    }
  }

  /**
   * POST /v1/leases/{id}/report: banned/rate_limited bench the proxy for the target; unreachable
   * holds it out until a probe passes. `release: true` also ends the lease (one call for both).
   */
  async report(
    leaseID: string,
    result: ReportResult,
    report: Omit<ReportRequest, 'result'> = {},
    options: CallOptions = {},
  ): Promise<ReportResponse> {
    return this.call<ReportResponse>(
      'POST',
      `/v1/leases/${seg(leaseID)}/report`,
      { result, ...report },
      options,
    );
  }

  /**
   * POST /v1/reports: several reports in one call (at most MAX_BATCH_REPORTS), applied in
   * order as one atomic step (all or none); a report whose lease is gone answers its own
   * `lease_not_found` item beside the others.
   */
  async reportMany(reports: readonly BatchedReport[], options: CallOptions = {}): Promise<ReportsResponse> {
    return this.call<ReportsResponse>('POST', '/v1/reports', { reports }, options);
  }

  /** DELETE /v1/sessions/{key}: forgets the session's proxy binding; idempotent. */
  async endSession(key: string, options: CallOptions = {}): Promise<void> {
    await this.call<undefined>('DELETE', `/v1/sessions/${seg(key)}`, undefined, options);
  }

  private async call<T>(method: Method, path: string, body: unknown, options: CallOptions): Promise<T> {
    // A write's one request id, kept through every attempt below (and the caller's own).
    const requestID = method === 'GET' ? undefined : (options.requestID ?? randomUUID());
    let throttled = 0;
    let unavailable = 0;
    for (;;) {
      try {
        return await this.callOnce<T>(method, path, body, options, requestID);
      } catch (err) {
        if (!(err instanceof DiscoveryApiError)) throw err;
        const waitSeconds = err.retryAfterSeconds ?? 1;
        if (waitSeconds > MAX_TOO_MANY_REQUESTS_WAIT_SECONDS) throw err;
        if (THROTTLED_CODES.includes(err.code) && throttled < this.tooManyRequestsRetries) throttled++;
        else if (UNAVAILABLE_CODES.includes(err.code) && unavailable < this.unavailableRetries) unavailable++;
        else throw err;
        await sleep(waitSeconds * 1000, options.signal);
      }
    }
  }

  private async callOnce<T>(
    method: Method,
    path: string,
    body: unknown,
    options: CallOptions,
    requestID: string | undefined,
  ): Promise<T> {
    const name = `${method} ${path.split('?')[0]}`;
    const timeoutMs = positive('timeoutMs', options.timeoutMs ?? this.timeoutMs);
    // A timer cleared when the call ends: AbortSignal.timeout's would fire for every call
    // anyway, long after it answered, and build a DOMException each time (a crawl makes
    // thousands of calls; the profile showed them).
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), timeoutMs);
    timer.unref(); // as AbortSignal.timeout's: a call in flight keeps the process up by its socket
    const signal = options.signal ? AbortSignal.any([options.signal, timeout.signal]) : timeout.signal;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.options.token) headers.authorization = `Bearer ${this.options.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (requestID !== undefined) headers['idempotency-key'] = requestID;
    try {
      const response = await request(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
        ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
      });
      const text = await response.body.text();
      return decode<T>(name, response.statusCode, text, retryAfterOf(response.headers['retry-after']));
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timeout.signal.aborted) throw new DiscoveryTimeoutError(name, timeoutMs);
      if (err instanceof DiscoveryApiError || err instanceof DiscoveryTransportError) throw err;
      throw new DiscoveryTransportError(name, (err as Error).message ?? String(err), err);
    } finally {
      clearTimeout(timer);
    }
  }
}

function retryAfterOf(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  return text !== undefined && /^\d+$/.test(text.trim()) ? Number(text) : undefined;
}

function decode<T>(call: string, status: number, text: string, retryAfterSeconds?: number): T {
  if (status >= 200 && status < 300) {
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new DiscoveryTransportError(call, `HTTP ${status} with a body that is not JSON`, err);
    }
  }
  const error = parseErrorBody(text);
  if (error === undefined) {
    throw new DiscoveryTransportError(
      call,
      `HTTP ${status} without an API error body (is baseUrl the discovery API?): ${text.slice(0, 200)}`,
    );
  }
  throw new DiscoveryApiError(status, error.error, error.message, call, retryAfterSeconds);
}

function parseErrorBody(text: string): ApiErrorBody | undefined {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body !== 'object' || body === null) return undefined;
    const { error, message } = body as Record<string, unknown>;
    return typeof error === 'string' && typeof message === 'string'
      ? { error: error as ApiErrorBody['error'], message }
      : undefined;
  } catch {
    return undefined;
  }
}

function splitProxyID(id: string): { namespace: string; name: string } {
  const at = id.indexOf('/');
  if (at <= 0 || at === id.length - 1 || id.indexOf('/', at + 1) !== -1) {
    throw new TypeError(`a proxy id is "namespace/name", got ${JSON.stringify(id)}`);
  }
  return { namespace: id.slice(0, at), name: id.slice(at + 1) };
}

function seg(value: string): string {
  if (value === '') throw new TypeError('a path parameter must not be empty');
  return encodeURIComponent(value);
}

function retries(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0)
    throw new TypeError(`${name} must be a non-negative integer, got ${value}`);
  return value;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new TypeError(`${name} must be a positive number, got ${value}`);
  return value;
}

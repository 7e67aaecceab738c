// Turns untrusted query strings and JSON bodies into typed requests, or throws an ApiError
// (400) that names the offending field. Unknown fields are rejected: a typo such as "ttl"
// silently falling back to a default would be worse than an error.
import { ApiError } from './api-error.js';
import { REPORT_RESULTS, REQUEST_ID_PATTERN, type ReportResult } from '../book/lease-store.js';
import { parseExitIPTerm, type ExitIPTerm } from '../book/exit-ip-match.js';
import { MAX_EXCLUDED } from '../book/lease-exclude.js';
import { targetName } from '../book/target-name.js';

export interface ListQuery {
  selector: Record<string, string>;
  healthy?: boolean;
  /** The lease request's exit IP term, as a query parameter of the same name and syntax. */
  exitIP?: ExitIPTerm;
  /** The page size. */
  limit: number;
  /** From a `continue` token: the page starts after this proxy id. */
  after?: string;
}

/**
 * The whole of 10,000 proxies took ~9 ms of the event loop the health probes share; a page of
 * 500 about 1 ms. 200 keeps a page well under a millisecond (docs/benchmarks.md).
 */
export const DEFAULT_LIST_LIMIT = 200;
export const MAX_LIST_LIMIT = 1000;

export interface LeaseBody {
  selector: Record<string, string>;
  exitIP?: ExitIPTerm;
  ttlSeconds: number;
  target?: string;
  session?: string;
  /** Proxy ids (namespace/name) not to give (book/lease-exclude.ts). */
  exclude?: ReadonlySet<string>;
}

export interface RenewBody {
  /** Absent: the lease's original TTL. */
  ttlSeconds?: number;
}

export interface ReportBody {
  result: ReportResult;
  target?: string;
  /** rate_limited only: the response's Retry-After, in whole seconds. */
  retryAfterSeconds?: number;
  /** Ends the lease once the report is recorded: a crawler's last report and its release in one call. */
  release?: true;
}

/** A day: longer Retry-After values are client bugs (or a site asking for more than any cooldown gives). */
export const MAX_RETRY_AFTER_SECONDS = 86_400;

export interface TTLLimits {
  defaultTTLSeconds: number;
  maxTTLSeconds: number;
}

const ATTR_PREFIX = 'attr.';
const MAX_SELECTOR_KEYS = 64;
export const MAX_SESSION_LENGTH = 128;
// Crawlee's session ids (session_<random>) and most others fit.
const SESSION_PATTERN = /^[A-Za-z0-9._:@-]+$/;

/** Parses `attr.<key>=<value>`, `healthy=true|false`, `limit` and `continue` from a raw query string. */
export function parseListQuery(rawQuery: string): ListQuery {
  const selector: Record<string, string> = {};
  let healthy: boolean | undefined;
  let limit = DEFAULT_LIST_LIMIT;
  let after: string | undefined;
  let exitIP: ExitIPTerm | undefined;
  const seen = new Set<string>();
  for (const [name, value] of new URLSearchParams(rawQuery)) {
    if (seen.has(name)) throw invalid(`query parameter '${name}' is given more than once`);
    seen.add(name);
    if (name === 'exitIP') {
      exitIP = parseExitIP(value);
    } else if (name === 'healthy') {
      if (value !== 'true' && value !== 'false')
        throw invalid(`healthy must be 'true' or 'false', got '${value}'`);
      healthy = value === 'true';
    } else if (name === 'limit') {
      limit = Number(value);
      if (!/^\d+$/.test(value) || limit < 1 || limit > MAX_LIST_LIMIT)
        throw invalid(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${describe(value)}`);
    } else if (name === 'continue') {
      after = parseContinue(value);
    } else if (name.startsWith(ATTR_PREFIX) && name.length > ATTR_PREFIX.length) {
      selector[name.slice(ATTR_PREFIX.length)] = value;
    } else {
      throw invalid(
        `unknown query parameter '${name.length > 64 ? `${name.slice(0, 61)}...` : name}'; expected attr.<key>=<value>, healthy=true|false, exitIP, limit or continue`,
      );
    }
  }
  if (Object.keys(selector).length > MAX_SELECTOR_KEYS)
    throw invalid(`at most ${MAX_SELECTOR_KEYS} attr.<key> parameters`);
  return {
    selector,
    ...(healthy === undefined ? {} : { healthy }),
    ...(exitIP === undefined ? {} : { exitIP }),
    limit,
    ...(after === undefined ? {} : { after }),
  };
}

/** GET /v1/proxies/{namespace}/{name}'s query: an optional `target` the answer is for. */
export function parseProxyQuery(rawQuery: string): { target?: string } {
  let target: string | undefined;
  const seen = new Set<string>();
  for (const [name, value] of new URLSearchParams(rawQuery)) {
    if (seen.has(name)) throw invalid(`query parameter '${name}' is given more than once`);
    seen.add(name);
    if (name !== 'target') {
      throw invalid(
        `unknown query parameter '${name.length > 64 ? `${name.slice(0, 61)}...` : name}'; expected target`,
      );
    }
    target = parseTarget(value);
  }
  return target === undefined ? {} : { target };
}

/** The `continue` token of a page that ends at proxy `lastID`: opaque to clients. */
export function continueToken(lastID: string): string {
  return Buffer.from(lastID, 'utf8').toString('base64url');
}

function parseContinue(value: string): string {
  const id = Buffer.from(value, 'base64url').toString('utf8');
  // Only a token this API issued decodes to a namespace/name id and encodes back to itself.
  if (value === '' || continueToken(id) !== value || !/^[^/\s]+\/[^/\s]+$/.test(id))
    throw invalid("continue is not a token this API issued; pass the previous page's 'continue' unchanged");
  return id;
}

/** Parses the body of POST /v1/leases; an absent body means "any proxy, default TTL". */
export function parseLeaseBody(body: unknown, limits: TTLLimits): LeaseBody {
  const fields = objectBody(body ?? {}, ['selector', 'exitIP', 'ttlSeconds', 'target', 'session', 'exclude']);
  // Only an absent field takes the default: an explicit null is a client bug worth reporting.
  const ttlSeconds = parseTTL(
    fields.ttlSeconds === undefined ? limits.defaultTTLSeconds : fields.ttlSeconds,
    limits,
  );
  const selector = parseSelector(fields.selector === undefined ? {} : fields.selector);
  const target = parseTarget(fields.target);
  const session = fields.session === undefined ? undefined : parseSessionKey(fields.session, 'session');
  const exitIP = fields.exitIP === undefined ? undefined : parseExitIP(fields.exitIP);
  const exclude = fields.exclude === undefined ? undefined : parseExclude(fields.exclude);
  // A session's lease goes to its bound proxy: excluding proxies from it would move it silently.
  if (exclude !== undefined && session !== undefined)
    throw invalid('exclude does not go with session: a session keeps its own proxy');
  return {
    selector,
    ...(exitIP === undefined ? {} : { exitIP }),
    ttlSeconds,
    ...(target === undefined ? {} : { target }),
    ...(session === undefined ? {} : { session }),
    ...(exclude === undefined || exclude.size === 0 ? {} : { exclude }),
  };
}

/** A proxy id as the API answers it: namespace/name (a DNS label, a DNS subdomain name). */
export const PROXY_ID_PATTERN =
  /^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9](?:[-.a-z0-9]{0,251}[a-z0-9])?$/;

function parseExclude(value: unknown): ReadonlySet<string> {
  if (!Array.isArray(value))
    throw invalid(`exclude must be an array of proxy ids (namespace/name), got ${describe(value)}`);
  if (value.length > MAX_EXCLUDED)
    throw invalid(`exclude has ${value.length} proxy ids; at most ${MAX_EXCLUDED}`);
  value.forEach((id: unknown, i) => {
    if (typeof id !== 'string' || !PROXY_ID_PATTERN.test(id))
      throw invalid(`exclude[${i}] must be a proxy id (namespace/name), got ${describe(id)}`);
  });
  return new Set(value as string[]);
}

/** Parses the body of POST /v1/leases/{id}/renew; an absent body keeps the lease's own TTL. */
export function parseRenewBody(body: unknown, limits: TTLLimits): RenewBody {
  const fields = objectBody(body ?? {}, ['ttlSeconds']);
  return fields.ttlSeconds === undefined ? {} : { ttlSeconds: parseTTL(fields.ttlSeconds, limits) };
}

/** A session key from a body field or a path segment: 1..128 of [A-Za-z0-9._:@-]. */
/** The header a write's request id comes in (the IETF draft's name for it). */
export const REQUEST_ID_HEADER = 'idempotency-key';

/**
 * A write's Idempotency-Key header: absent, or 1 to 128 of letters, digits and . _ : - (a
 * UUID fits). A repeat of the key on the same call gets the first outcome.
 */
export function parseRequestID(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !REQUEST_ID_PATTERN.test(value)) {
    throw invalid(
      `the Idempotency-Key header must be 1 to 128 characters of letters, digits and . _ : - (a UUID fits), got ${describe(
        Array.isArray(value) ? value.join(', ') : value,
      )}`,
    );
  }
  return value;
}

export function parseSessionKey(value: unknown, name: string): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > MAX_SESSION_LENGTH ||
    !SESSION_PATTERN.test(value)
  ) {
    throw invalid(
      `${name} must be 1 to ${MAX_SESSION_LENGTH} characters of letters, digits and . _ : @ -, got ${describe(value)}`,
    );
  }
  return value;
}

function parseTTL(ttlSeconds: unknown, limits: TTLLimits): number {
  if (
    typeof ttlSeconds !== 'number' ||
    !Number.isInteger(ttlSeconds) ||
    ttlSeconds < 1 ||
    ttlSeconds > limits.maxTTLSeconds
  ) {
    throw invalid(
      `ttlSeconds must be an integer from 1 to ${limits.maxTTLSeconds}, got ${JSON.stringify(ttlSeconds)}`,
    );
  }
  return ttlSeconds;
}

/** Parses the body of POST /v1/leases/{id}/report. */
export function parseReportBody(body: unknown): ReportBody {
  return reportFields(objectBody(body ?? {}, REPORT_FIELDS));
}

/** One report of a batch: a report body naming its lease. */
export interface BatchedReport extends ReportBody {
  leaseID: string;
}

/**
 * A batch stays well inside the 16 KiB body limit (about 100 bytes a report), and a client
 * with more to say sends several.
 */
export const MAX_BATCH_REPORTS = 100;
const MAX_LEASE_ID_LENGTH = 128;

/** POST /v1/reports: every report is checked before any is recorded, so a 400 records none. */
export function parseReportsBody(body: unknown): BatchedReport[] {
  const { reports } = objectBody(body ?? {}, ['reports']);
  if (!Array.isArray(reports) || reports.length === 0 || reports.length > MAX_BATCH_REPORTS) {
    throw invalid(
      `reports must be an array of 1 to ${MAX_BATCH_REPORTS} reports, got ${
        Array.isArray(reports) ? `${reports.length}` : describe(reports)
      }`,
    );
  }
  return reports.map((item: unknown, i) => {
    try {
      const fields = objectBody(item, ['leaseID', ...REPORT_FIELDS], 'a report');
      const { leaseID } = fields;
      if (typeof leaseID !== 'string' || leaseID.length === 0 || leaseID.length > MAX_LEASE_ID_LENGTH) {
        throw invalid(
          `leaseID must be a string of 1 to ${MAX_LEASE_ID_LENGTH} characters, got ${describe(leaseID)}`,
        );
      }
      return { leaseID, ...reportFields(fields) };
    } catch (err) {
      if (err instanceof ApiError) throw invalid(`reports[${i}]: ${err.message}`);
      throw err;
    }
  });
}

const REPORT_FIELDS = ['result', 'target', 'retryAfterSeconds', 'release'] as const;

function reportFields(fields: Record<string, unknown>): ReportBody {
  const result = fields.result;
  if (!REPORT_RESULTS.includes(result as ReportResult)) {
    throw invalid(
      `result must be one of ${REPORT_RESULTS.join(', ')}, got ${JSON.stringify(result) ?? 'nothing'}`,
    );
  }
  const target = parseTarget(fields.target);
  const retryAfterSeconds = parseRetryAfter(fields.retryAfterSeconds, result as ReportResult);
  if (fields.release !== undefined && typeof fields.release !== 'boolean') {
    throw invalid(`release must be true or false, got ${JSON.stringify(fields.release)}`);
  }
  return {
    result: result as ReportResult,
    ...(target === undefined ? {} : { target }),
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    ...(fields.release === true ? { release: true as const } : {}),
  };
}

function parseRetryAfter(value: unknown, result: ReportResult): number | undefined {
  if (value === undefined) return undefined;
  if (result !== 'rate_limited') {
    throw invalid(`retryAfterSeconds goes only with result rate_limited, got result ${result}`);
  }
  if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_RETRY_AFTER_SECONDS) {
    throw invalid(
      `retryAfterSeconds must be an integer from 0 to ${MAX_RETRY_AFTER_SECONDS}, got ${JSON.stringify(value)}`,
    );
  }
  return value as number;
}

function objectBody(
  body: unknown,
  allowed: readonly string[],
  what = 'request body',
): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw invalid(`${what} must be a JSON object, got ${describe(body)}`);
  }
  const unknown = Object.keys(body).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    throw invalid(
      `unknown field(s) ${unknown.map((k) => `'${k}'`).join(', ')}; allowed: ${allowed.join(', ')}`,
    );
  }
  return body as Record<string, unknown>;
}

function parseExitIP(value: unknown): ExitIPTerm {
  const term = typeof value === 'string' && value.length <= 64 ? parseExitIPTerm(value) : undefined;
  if (term === undefined)
    throw invalid(
      `exitIP must be an IP address or a CIDR block without host bits (e.g. 203.0.113.7, 203.0.113.0/24, 2001:db8::/32), got ${describe(value)}`,
    );
  return term;
}

function parseSelector(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(`selector must be an object of string values, got ${describe(value)}`);
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_SELECTOR_KEYS) throw invalid(`selector has more than ${MAX_SELECTOR_KEYS} keys`);
  for (const [key, item] of entries) {
    if (key === '') throw invalid('selector keys must not be empty');
    if (typeof item !== 'string') throw invalid(`selector.${key} must be a string, got ${describe(item)}`);
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

/** The canonical target (target-name.ts): a host name, lower-cased; a URL or a port is a 400. */
function parseTarget(value: unknown): string | undefined {
  // null is accepted as "no target" so a client may echo a lease's `target: null` back.
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid(`target must be a string, got ${describe(value)}`);
  const name = targetName(value);
  if (!name.ok) throw invalid(name.message);
  return name.target;
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  const shown = JSON.stringify(value);
  // Echo enough to recognise the value, never a whole oversized one.
  return `${typeof value} ${shown.length > 80 ? `${shown.slice(0, 77)}...` : shown}`;
}

function invalid(message: string): ApiError {
  return new ApiError(400, 'invalid_request', message);
}

// OpenAPI 3.1 description of the discovery API, served at GET /openapi.json. A test checks
// it against the implementation in both directions, so keep the two in step.
import { API_ERROR_CODES } from './api-error.js';
import { BODY_LIMIT_BYTES } from './json-body.js';
import { NOT_LEASABLE_CODES } from '../book/leasability.js';
import { REPORT_RESULTS } from '../book/lease-store.js';
import { DEFAULT_MAX_CONCURRENT_LISTS } from './list-slots.js';
import {
  DEFAULT_LIST_LIMIT,
  MAX_LIST_LIMIT,
  MAX_BATCH_REPORTS,
  MAX_RETRY_AFTER_SECONDS,
  MAX_SESSION_LENGTH,
} from './request-parsing.js';
import { SERVER_DEFAULTS } from './server.js';

export interface SchemaObject {
  type?: string | string[];
  properties?: Record<string, SchemaObject>;
  required?: string[];
  additionalProperties?: boolean | SchemaObject;
  items?: SchemaObject;
  minItems?: number;
  maxItems?: number;
  oneOf?: SchemaObject[];
  enum?: readonly (string | number | boolean | null)[];
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  description?: string;
  $ref?: string;
}

interface ResponseObject {
  description: string;
  headers?: Record<string, { description: string; schema: SchemaObject }>;
  content?: Record<string, { schema: SchemaObject }>;
}

interface ParameterObject {
  name: string;
  in: 'query' | 'path' | 'header';
  required?: boolean;
  description: string;
  schema: SchemaObject;
}

export interface OperationObject {
  operationId: string;
  summary: string;
  description?: string;
  security?: Record<string, string[]>[];
  parameters?: ParameterObject[];
  requestBody?: { required: boolean; content: Record<string, { schema: SchemaObject }> };
  responses: Record<string, ResponseObject | { $ref: string }>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description: string };
  paths: Record<string, Record<string, OperationObject>>;
  components: {
    schemas: Record<string, SchemaObject>;
    responses: Record<string, ResponseObject>;
    securitySchemes: Record<string, { type: string; scheme: string; description: string }>;
  };
  security: Record<string, string[]>[];
}

const json = (schema: SchemaObject) => ({ 'application/json': { schema } });
const ref = (name: string): SchemaObject => ({ $ref: `#/components/schemas/${name}` });
const errorResponse = (description: string): ResponseObject => ({ description, content: json(ref('Error')) });
const shared = (name: string) => ({ $ref: `#/components/responses/${name}` });
const leaseID: ParameterObject = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The leaseID returned by POST /v1/leases.',
  schema: { type: 'string' },
};
const requestID: ParameterObject = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    "The call's request id, 1 to 128 of letters, digits and . _ : - (a UUID fits): the first outcome is " +
    'recorded with the write, atomically, and a repeat of the same call with the same key (a retry after a ' +
    'timeout, a dropped connection or a 503) answers that outcome again for 15 minutes, writing nothing: one ' +
    'lease, one ban. Per token. The clients send one on every write. Anything else is a 400 naming the header.',
  schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
};
const target: SchemaObject = {
  type: 'string',
  description:
    'Site the proxy is used against: a host name (stored lower-case, a trailing dot dropped) or an IP ' +
    'address, without scheme, port or path (a URL or host:port is a 400 naming target). Absent = the global pool.',
};
const sessionKey: SchemaObject = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_SESSION_LENGTH,
  pattern: '^[A-Za-z0-9._:@-]+$',
};
const ttlSeconds: SchemaObject = {
  type: 'integer',
  minimum: 1,
  description: 'At most the configured maximum (--max-lease-ttl, default 3600).',
};
const bodyLimit = `${BODY_LIMIT_BYTES / 1024}kb`;
/** One report's fields: the body of POST /v1/leases/{id}/report, and an item of POST /v1/reports. */
const reportRequestProperties: Record<string, SchemaObject> = {
  result: { type: 'string', enum: [...REPORT_RESULTS] },
  target,
  retryAfterSeconds: {
    type: 'integer',
    minimum: 0,
    maximum: MAX_RETRY_AFTER_SECONDS,
    description:
      "rate_limited only: the response's Retry-After in seconds; the cooldown lasts exactly this long " +
      '(at least 1 s, at most --max-cooldown).',
  },
  release: {
    type: 'boolean',
    description:
      'true: end the lease once the report is recorded, freeing its slot (the last report and the release ' +
      'in one call). Default false.',
  },
};

/** The Proxy schema: a list item, the single GET, and (with url) the leased proxy. */
const proxySchema = {
  type: 'object',
  required: [
    'id',
    'ip',
    'port',
    'attributes',
    'phase',
    'healthy',
    'latencyMillis',
    'activeLeases',
    'maxLeases',
    'stats',
  ],
  additionalProperties: false,
  properties: {
    id: { type: 'string', description: 'namespace/name of the Proxy resource.' },
    ip: { type: 'string', description: 'Empty until the proxy has an address.' },
    port: { type: 'integer', minimum: 1, maximum: 65535 },
    attributes: ref('Attributes'),
    phase: { type: 'string' },
    healthy: { type: 'boolean' },
    latencyMillis: { type: 'number', minimum: 0 },
    exitIP: {
      type: 'string',
      description:
        'The egress address target sites see, as the operator last read it through the proxy from ' +
        'spec.healthCheck.exitIPURL (canonical IPv4 or IPv6). Absent when not read.',
    },
    activeLeases: { type: 'integer', minimum: 0 },
    maxLeases: { type: 'integer', minimum: 0, description: '0 = list-only, never leased.' },
    stats: ref('OutcomeStats'),
    held: {
      type: 'string',
      enum: ['suspect', 'down'],
      description:
        'Present while the lease book holds the proxy out of every lease ahead of its status: suspect (an ' +
        'unreachable report awaits a probe) or down (the health engine found it unhealthy; status follows).',
    },
  },
} satisfies SchemaObject;

/** Proxy plus its leasability (the single GET): derived, so the two can never drift apart. */
const proxyDetailSchema: SchemaObject = {
  ...proxySchema,
  required: [...proxySchema.required, 'leasable', 'target', 'reasons'],
  properties: {
    ...proxySchema.properties,
    leasable: {
      type: 'boolean',
      description: 'Whether a lease for target could be given this proxy now (its selector aside).',
    },
    target: {
      type: ['string', 'null'],
      description: 'The target leasable is for; null = a lease naming none.',
    },
    reasons: {
      type: 'array',
      description: 'Every reason against leasing it, in a fixed order; empty when nothing stands against it.',
      items: ref('NotLeasableReason'),
    },
  },
};

/** Proxy plus its url: derived, so the two can never drift apart. */
const leasedProxySchema: SchemaObject = {
  ...proxySchema,
  required: [...proxySchema.required, 'url'],
  properties: {
    ...proxySchema.properties,
    url: {
      type: 'string',
      description:
        'http://ip:port, or http://user:pass@ip:port (userinfo percent-encoded) when the proxy requires ' +
        'credentials: ready to use as an HTTP proxy URL. A secret: do not log it.',
    },
    username: {
      type: 'string',
      description: "The proxy's basic-auth user name, when it requires credentials.",
    },
    password: {
      type: 'string',
      description: "The proxy's basic-auth password, when it requires credentials.",
    },
  },
};

const proxyID: ParameterObject[] = [
  {
    name: 'namespace',
    in: 'path',
    required: true,
    description: "The Proxy's namespace.",
    schema: { type: 'string' },
  },
  { name: 'name', in: 'path', required: true, description: "The Proxy's name.", schema: { type: 'string' } },
];
const leaseResponse = (description: string): ResponseObject => ({ description, content: json(ref('Lease')) });
const { headersTimeoutMs, requestTimeoutMs, maxHeaderSize } = SERVER_DEFAULTS;

export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'proxy-operator discovery API',
    version: 'v1',
    description:
      'Lists proxies and leases them to crawlers. Leases, sessions, cooldowns and statistics live in memory: an ' +
      'operator restart drops them, so clients must tolerate a lease vanishing (the proxy keeps working; lease ' +
      'again). A lease whose proxy turns unhealthy or is deleted stays valid until it expires or is released, but ' +
      'that proxy is not leased again. Limits on every request: request line and headers together at most ' +
      `${maxHeaderSize} bytes (else 431 headers_too_large); headers within ${headersTimeoutMs / 1000} s and the ` +
      `whole request within ${requestTimeoutMs / 1000} s (else 408 request_timeout, checked every second); ` +
      `bodies at most ${bodyLimit} (else 413 at once, a declared Content-Length included, without reading the ` +
      'body); CONNECT and protocol upgrades get 405. These answers close the connection. Every /v1 call needs a ' +
      'bearer token (unless the operator runs with --discovery-unauthenticated); a lease and a session belong ' +
      "to the token that took them (another token's lease ID answers 404 lease_not_found), and each token has " +
      'its own rate limit (429 too_many_requests with Retry-After).',
  },
  security: [{ bearer: [] }],
  paths: {
    '/openapi.json': {
      get: {
        operationId: 'getOpenApi',
        summary: 'This document.',
        security: [],
        responses: { '200': { description: 'The OpenAPI document.', content: json({ type: 'object' }) } },
      },
    },
    '/v1/proxies': {
      get: {
        operationId: 'listProxies',
        summary: 'List proxies, filtered by attributes, health and exit IP, sorted by id.',
        parameters: [
          {
            name: 'healthy',
            in: 'query',
            description: 'Only healthy (true) or only unhealthy (false) proxies; absent = both.',
            schema: { type: 'string', enum: ['true', 'false'] },
          },
          {
            name: 'exitIP',
            in: 'query',
            description:
              'As in a lease request: only proxies whose exit IP is this address or in this CIDR block (IPv4 or ' +
              'IPv6, no host bits set: 203.0.113.7, 203.0.113.0/24, 2001:db8::/32; percent-encode the slash or ' +
              'not). A proxy whose exit IP is not known never matches. Anything else is a 400 naming exitIP.',
            schema: { type: 'string', maxLength: 64 },
          },
          {
            name: 'attr.{key}',
            in: 'query',
            description:
              'Repeatable for different keys: attr.geo=eu&attr.purpose=crawl keeps proxies whose attributes hold ' +
              'every given key with exactly that value. Any other query parameter is rejected with 400.',
            schema: { type: 'string' },
          },
          {
            name: 'limit',
            in: 'query',
            description: `Proxies per page, 1 to ${MAX_LIST_LIMIT}; default ${DEFAULT_LIST_LIMIT}.`,
            schema: { type: 'integer', minimum: 1, maximum: MAX_LIST_LIMIT },
          },
          {
            name: 'continue',
            in: 'query',
            description:
              "The previous page's `continue`, unchanged (with the same filters): the next page, in id order. " +
              'A proxy added or removed between pages may be missed or seen; anything else than a token this API ' +
              'issued is 400.',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '200': { description: 'Matching proxies.', content: json(ref('ProxyList')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
        },
      },
    },
    '/v1/proxies/{namespace}/{name}': {
      get: {
        operationId: 'getProxy',
        summary: 'One proxy (its list item), whether it is leasable now and every reason it is not.',
        description:
          'The list item plus leasable, target and reasons, read from the lease book at once. reasons lists, ' +
          'in this order, every reason against leasing it: deleting, draining (replaced soon: live leases run ' +
          'to their end, no new ones), leases_disabled (maxLeases 0), no_address, unhealthy (with the Healthy ' +
          "condition's reason and the phase), suspect, full, cooling_down (every running cooldown: target, " +
          'null for the global pool, and until). A cooldown keeps the proxy only from leases for its own ' +
          'target, so leasable (for the target query parameter, or for a lease naming none) can be true ' +
          'beside a cooling_down reason. A selector is not considered.',
        parameters: [
          ...proxyID,
          {
            name: 'target',
            in: 'query',
            required: false,
            description:
              'The target leasable is answered for (as in a lease request); absent = a lease naming none.',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '200': { description: 'The proxy and its leasability.', content: json(ref('ProxyDetail')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
          '404': errorResponse('proxy_not_found: no Proxy with this namespace and name.'),
        },
      },
    },
    '/v1/leases': {
      post: {
        operationId: 'acquireLease',
        summary: 'Lease the least-loaded healthy proxy matching the selector.',
        description:
          'Chooses among healthy proxies with an IP and maxLeases > 0 that match the selector, have a free slot and ' +
          'are not cooling down for the target (a lease without target uses the global pool: only target-less ' +
          'reports bench a proxy for it). Fewest active leases first; among equally loaded proxies one without ' +
          'recent banned/rate_limited reports for the target first (else the lowest failure ratio), then lowest ' +
          'latency, then id. With a session key, the lease goes to the proxy the session is bound to while that ' +
          'proxy stays leasable for this request; otherwise the session moves (session.moved = true). Sessions ' +
          'expire after an idle time (default 30 min); at the session cap, starting a new session forgets the ' +
          'least recently used one. The body may be sent with any content type; an empty body leases any proxy ' +
          'for the default TTL.',
        parameters: [requestID],
        requestBody: { required: false, content: json(ref('LeaseRequest')) },
        responses: {
          '201': leaseResponse('Lease granted.'),
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
          '409': errorResponse(
            'No lease: error is no_match (no healthy leasable proxy matches), all_busy (all matches are at maxLeases; ' +
              'retry soon) or all_cooling_down (all matches are cooling down for this target; the Retry-After header ' +
              'then says in how many seconds the first of those cooldowns ends).',
          ),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
        },
      },
    },
    '/v1/leases/{id}': {
      delete: {
        operationId: 'releaseLease',
        summary: 'Release a lease early.',
        parameters: [leaseID, requestID],
        responses: {
          '204': { description: 'Released.' },
          '404': errorResponse(
            "lease_not_found: the lease is unknown, expired, released already, or another token's (which stays live)",
          ),
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
        },
      },
    },
    '/v1/leases/{id}/renew': {
      post: {
        operationId: 'renewLease',
        summary: 'Extend a live lease without releasing it.',
        description:
          'The lease then ends ttlSeconds from now (default: its original TTL), but a renewal never shortens it. ' +
          'It never moves the lease: proxy.healthy says whether the proxy is still healthy, and a proxy deleted ' +
          'since shows as it was, with healthy false and phase Deleting.',
        parameters: [leaseID, requestID],
        requestBody: { required: false, content: json(ref('RenewRequest')) },
        responses: {
          '200': leaseResponse('Renewed.'),
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
          '404': errorResponse(
            "lease_not_found: the lease is unknown, expired, released, or another token's",
          ),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
        },
      },
    },
    '/v1/leases/{id}/report': {
      post: {
        operationId: 'reportLease',
        summary: "Report how the lease's proxy fared against a target.",
        description:
          "banned and rate_limited keep the proxy out of new leases for the target (default: the lease's own " +
          'target; none = the global pool, which only target-less leases use). Each has its own cooldown and ' +
          'streak: consecutive banned reports for the same proxy and target double a long rest (first ' +
          '--cooldown, at most --max-cooldown), consecutive rate_limited ones a short one (first ' +
          '--rate-limit-cooldown, at most --max-rate-limit-cooldown; exactly retryAfterSeconds when given); ' +
          '±10 % jitter; ok resets both streaks; a running cooldown is never shortened. unreachable says the proxy ' +
          'itself could not carry the request (connection refused or reset by the proxy, a timeout connecting to ' +
          'it, a CONNECT it answered with a non-2xx): the proxy becomes suspect, leased to nobody (any target, any ' +
          'session) until the health engine, asked at once, has probed it again: a passing probe ends the ' +
          'suspicion, failureThreshold failing ones make it Unhealthy. A report on a proxy already suspect, or ' +
          'within --suspicion-holdoff of a passing re-probe, starts nothing (suspect tells which). Every report ' +
          "counts in the proxy's stats. release: true ends the lease once the report is recorded (as DELETE " +
          '/v1/leases/{id} would), so that a last report and the release are one call.',
        parameters: [leaseID, requestID],
        requestBody: { required: true, content: json(ref('ReportRequest')) },
        responses: {
          '200': { description: 'Report recorded.', content: json(ref('ReportResponse')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
          '404': errorResponse(
            "lease_not_found: the lease is unknown, expired, released, or another token's",
          ),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
        },
      },
    },
    '/v1/reports': {
      post: {
        operationId: 'reportLeases',
        summary: `Report on several leases in one call (1 to ${MAX_BATCH_REPORTS}).`,
        description:
          'Each report means what it means on POST /v1/leases/{id}/report, and they are applied in order, as ' +
          'one atomic step: all of them or none. Every report is checked first: a 400 names the first bad one ' +
          '(reports[i]), a 429 cooldown_quota the first whose cooldown is past the quota, and both record none; ' +
          'a 503 records none either (outcome_unknown: the whole batch may still be applied; retry with the same ' +
          "Idempotency-Key). A report whose lease is unknown, expired, released or another token's has nothing " +
          'to record: it answers its own lease_not_found item beside the others. For a crawler that batches its ' +
          'ok reports: one call for every lease with successes to report, instead of one per lease.',
        parameters: [requestID],
        requestBody: { required: true, content: json(ref('ReportsRequest')) },
        responses: {
          '200': {
            description: "Every report's answer, in the request's order.",
            content: json(ref('ReportsResponse')),
          },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
        },
      },
    },
    '/v1/sessions/{key}': {
      delete: {
        operationId: 'endSession',
        summary:
          "End one of this token's sticky sessions (sessions are per token): forget its binding; its leases stay valid. Idempotent.",
        parameters: [
          { name: 'key', in: 'path', required: true, description: 'The session key.', schema: sessionKey },
        ],
        responses: {
          '204': { description: 'Ended (or already unknown).' },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '503': shared('StoreUnavailable'),
        },
      },
    },
  },
  components: {
    securitySchemes: {
      bearer: {
        type: 'http',
        scheme: 'bearer',
        description:
          'One of the named tokens of --discovery-tokens-file (re-read on change: deleting a line revokes that ' +
          'token alone), or DISCOVERY_TOKEN (named "default"). Without either the operator refuses to start unless ' +
          '--discovery-unauthenticated says the API is meant to be open.',
      },
    },
    responses: {
      BadRequest: errorResponse(
        'invalid_request or invalid_json: the message names the offending field (also a malformed HTTP request).',
      ),
      Unauthorized: {
        description: 'unauthorized: missing or wrong bearer token.',
        headers: { 'WWW-Authenticate': { description: 'Bearer challenge.', schema: { type: 'string' } } },
        content: json(ref('Error')),
      },
      NotFound: errorResponse('not_found: no such route.'),
      MethodNotAllowed: {
        description:
          'method_not_allowed: the path exists but not with this method; also every CONNECT and protocol upgrade.',
        headers: { Allow: { description: 'The allowed methods.', schema: { type: 'string' } } },
        content: json(ref('Error')),
      },
      RequestTimeout: errorResponse(
        `request_timeout: headers not received within ${headersTimeoutMs / 1000} s or the whole request within ` +
          `${requestTimeoutMs / 1000} s. Closes the connection.`,
      ),
      PayloadTooLarge: errorResponse(
        `payload_too_large: the body (or its declared Content-Length) exceeds ${bodyLimit}. Closes the connection.`,
      ),
      UnsupportedMediaType: errorResponse(
        'unsupported_media_type: a charset other than UTF-8, or a compressed body.',
      ),
      StoreUnavailable: {
        description:
          'store_unavailable: the shared lease store (Redis) could not be reached; nothing was changed: retry the ' +
          'same request after Retry-After seconds. outcome_unknown (writes only): the call reached the store and ' +
          'no answer came in time; it may have been applied, or be applied yet: retry it with the same ' +
          'Idempotency-Key to get its one outcome.',
        headers: {
          'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer' } },
        },
        content: json(ref('Error')),
      },
      TooManyRequests: {
        description:
          'too_many_requests: this token is over its rate limit (--discovery-rate-limit requests/s, bursts of ' +
          `--discovery-rate-burst), or, for GET /v1/proxies, already has ${DEFAULT_MAX_CONCURRENT_LISTS} lists in ` +
          'flight, or (no valid token) this source address failed authentication too often. Per-token quotas ' +
          '(docs/security.md, teams sharing one fleet): lease_quota (POST /v1/leases: the token holds its quota of ' +
          'live leases), report_quota (reports: the token is over its reports per second; a batch counts each ' +
          'item), cooldown_quota (a banned/rate_limited report would start a new cooldown past the token quota of ' +
          'running ones; in a batch, the item carries it). Nothing was done; retry after Retry-After seconds.',
        headers: {
          'Retry-After': {
            description: 'Seconds until the token may call again.',
            schema: { type: 'integer' },
          },
        },
        content: json(ref('Error')),
      },
      HeadersTooLarge: errorResponse(
        `headers_too_large: request line and headers exceed ${maxHeaderSize} bytes. Closes the connection.`,
      ),
    },
    schemas: {
      Error: {
        type: 'object',
        required: ['error', 'message'],
        additionalProperties: false,
        properties: {
          error: { type: 'string', enum: API_ERROR_CODES },
          message: { type: 'string' },
        },
      },
      Attributes: { type: 'object', additionalProperties: { type: 'string' } },
      OutcomeStats: {
        type: 'object',
        description:
          'Reports on leases of this proxy over a sliding window (all targets), in 1/15-window steps.',
        required: ['windowSeconds', 'ok', 'banned', 'rate_limited', 'unreachable'],
        additionalProperties: false,
        properties: {
          windowSeconds: { type: 'integer', minimum: 1 },
          ok: { type: 'integer', minimum: 0 },
          banned: { type: 'integer', minimum: 0 },
          rate_limited: { type: 'integer', minimum: 0 },
          unreachable: { type: 'integer', minimum: 0 },
        },
      },
      Proxy: proxySchema,
      LeasedProxy: leasedProxySchema,
      ProxyDetail: proxyDetailSchema,
      NotLeasableReason: {
        type: 'object',
        description:
          "One reason against leasing a proxy; code says which, and only that code's fields are present " +
          '(unhealthy: healthReason, phase; full: activeLeases, maxLeases; cooling_down: cooldowns).',
        required: ['code', 'message'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', enum: NOT_LEASABLE_CODES },
          message: { type: 'string', description: 'The reason in words, for a person.' },
          healthReason: {
            type: ['string', 'null'],
            description:
              "unhealthy: the Healthy condition's reason (null: not known yet, or the health engine's news ahead of status).",
          },
          phase: { type: 'string', description: 'unhealthy: the proxy phase.' },
          activeLeases: { type: 'integer', minimum: 0, description: 'full: the live leases.' },
          maxLeases: { type: 'integer', minimum: 1, description: 'full: the cap.' },
          cooldowns: {
            type: 'array',
            description: 'cooling_down: every running cooldown, earliest end first.',
            items: ref('Cooldown'),
          },
        },
      },
      Cooldown: {
        type: 'object',
        required: ['target', 'until'],
        additionalProperties: false,
        properties: {
          target: {
            type: ['string', 'null'],
            description:
              "The target it benches the proxy for; null = the global pool, or (hidden) another token's target.",
          },
          until: { type: 'string', format: 'date-time' },
          hidden: {
            type: 'boolean',
            enum: [true],
            description:
              "Another token's target: targets are private to the team that reported them; only that the proxy cools down for some site, and until when.",
          },
        },
      },
      ProxyList: {
        type: 'object',
        required: ['items'],
        additionalProperties: false,
        properties: {
          items: { type: 'array', items: ref('Proxy') },
          continue: {
            type: 'string',
            description: 'Present when another page follows: pass it back as the continue query parameter.',
          },
        },
      },
      LeaseRequest: {
        type: 'object',
        additionalProperties: false,
        properties: {
          selector: {
            ...ref('Attributes'),
            description: 'Attribute equality filter; default {} (any proxy).',
          },
          exitIP: {
            type: 'string',
            maxLength: 64,
            description:
              'Only a proxy whose exit IP is this address or in this CIDR block (IPv4 or IPv6, no host bits ' +
              'set: 203.0.113.7, 203.0.113.0/24, 2001:db8::/32). A proxy whose exit IP is not known never ' +
              'matches. Anything else is a 400 naming exitIP.',
          },
          ttlSeconds: {
            ...ttlSeconds,
            description: 'Default 300; at most the configured maximum (default 3600).',
          },
          target,
          session: {
            ...sessionKey,
            description:
              'Sticky-session key: leases in one session go to the same proxy while it stays leasable.',
          },
        },
      },
      RenewRequest: {
        type: 'object',
        additionalProperties: false,
        properties: { ttlSeconds: { ...ttlSeconds, description: "Default: the lease's original TTL." } },
      },
      Lease: {
        type: 'object',
        required: ['leaseID', 'proxy', 'expiresAt', 'target'],
        additionalProperties: false,
        properties: {
          leaseID: { type: 'string' },
          proxy: ref('LeasedProxy'),
          expiresAt: { type: 'string', format: 'date-time' },
          target: { type: ['string', 'null'] },
          session: ref('SessionOutcome'),
        },
      },
      SessionOutcome: {
        type: 'object',
        description: 'Present iff the lease was requested in a session.',
        required: ['key', 'moved'],
        additionalProperties: false,
        properties: {
          key: { type: 'string' },
          moved: {
            type: 'boolean',
            description:
              'true when the session was bound to another proxy that stopped being leasable (unhealthy, deleted, ' +
              'at maxLeases, cooling down for the target or not matching the selector) and moved here.',
          },
        },
      },
      ReportRequest: {
        type: 'object',
        required: ['result'],
        additionalProperties: false,
        properties: reportRequestProperties,
      },
      ReportsRequest: {
        type: 'object',
        required: ['reports'],
        additionalProperties: false,
        properties: {
          reports: {
            type: 'array',
            minItems: 1,
            maxItems: MAX_BATCH_REPORTS,
            items: {
              type: 'object',
              required: ['leaseID', 'result'],
              additionalProperties: false,
              properties: {
                leaseID: { type: 'string', minLength: 1, maxLength: 128 },
                ...reportRequestProperties,
              },
            },
          },
        },
      },
      ReportsResponse: {
        type: 'object',
        required: ['items'],
        additionalProperties: false,
        properties: {
          items: {
            type: 'array',
            items: {
              oneOf: [
                ref('ReportResponse'),
                {
                  type: 'object',
                  required: ['leaseID', 'error', 'message'],
                  additionalProperties: false,
                  properties: {
                    leaseID: { type: 'string' },
                    error: { type: 'string', enum: ['lease_not_found', 'cooldown_quota'] },
                    message: { type: 'string' },
                  },
                },
              ],
            },
          },
        },
      },
      ReportResponse: {
        type: 'object',
        required: ['leaseID', 'proxyID', 'result', 'target', 'cooldownUntil'],
        additionalProperties: false,
        properties: {
          leaseID: { type: 'string' },
          proxyID: { type: 'string' },
          result: { type: 'string', enum: [...REPORT_RESULTS] },
          target: { type: ['string', 'null'], description: 'The cooldown key used; null = the global pool.' },
          cooldownUntil: {
            type: ['string', 'null'],
            format: 'date-time',
            description: 'When the cooldown ends; null when the report started none (ok, unreachable).',
          },
          suspect: {
            type: 'boolean',
            description:
              'unreachable only: true when the proxy is held out as suspect (now or already); false when the report ' +
              'was not believed (a probe passed within --suspicion-holdoff).',
          },
          capped: {
            type: 'boolean',
            enum: [true],
            description:
              'banned/rate_limited only, present when true: this target was not recorded (no cooldown started) ' +
              'because the book is at its cap of (proxy, target) entries and every one of them still cools down: ' +
              "eviction never lifts a running cooldown. The report still counts in the proxy's statistics.",
          },
          released: {
            type: 'boolean',
            enum: [true],
            description: 'Present when the request asked for release: the lease has ended.',
          },
        },
      },
    },
  },
};

// Every /v1 operation sits behind the per-token rate limit.
for (const [path, item] of Object.entries(openApiDocument.paths)) {
  if (!path.startsWith('/v1/')) continue;
  for (const operation of Object.values(item)) operation.responses['429'] = shared('TooManyRequests');
}

// OpenAPI 3.1 description of the discovery API, served at GET /openapi.json. A test checks
// it against the implementation in both directions, so keep the two in step. Its pieces:
// openapi-parts.ts (types, helpers, shared parameters and schemas), openapi-components.ts.
import { DEFAULT_LIST_LIMIT, MAX_BATCH_REPORTS, MAX_LIST_LIMIT } from './request-parsing.js';
import {
  bodyLimit,
  errorResponse,
  headersTimeoutMs,
  json,
  leaseID,
  leaseResponse,
  maxHeaderSize,
  proxyID,
  ref,
  requestID,
  requestTimeoutMs,
  sessionKey,
  shared,
  type OpenApiDocument,
} from './openapi-parts.js';
import { openApiComponents } from './openapi-components.js';

export type { OperationObject, SchemaObject } from './openapi-parts.js';

/** What every API call may answer besides its own: a bad request, no or a wrong token, the store down. */
const EVERY_CALL_ERRORS = {
  '400': shared('BadRequest'),
  '401': shared('Unauthorized'),
  '503': shared('StoreUnavailable'),
};

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
      'its own rate limit (429 too_many_requests with Retry-After) and its own turn at the lease book (a few ' +
      'operations run at once, the tokens waiting are served in turn by cost; 429 book_queue_full when too many ' +
      'of its own wait).',
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
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
          ...EVERY_CALL_ERRORS,
        },
      },
    },
  },
  components: openApiComponents,
};

// Every /v1 operation sits behind the per-token rate limit.
for (const [path, item] of Object.entries(openApiDocument.paths)) {
  if (!path.startsWith('/v1/')) continue;
  for (const operation of Object.values(item)) operation.responses['429'] = shared('TooManyRequests');
}

// The document's components (openapi.ts): the security scheme, the shared error answers and
// every schema its operations refer to.
import { NOT_LEASABLE_CODES } from '../book/leasability.js';
import { REPORT_RESULTS } from '../book/lease-store.js';
import { MAX_EXCLUDED } from '../book/lease-exclude.js';
import { API_ERROR_CODES } from './api-error.js';
import { DEFAULT_MAX_CONCURRENT_LISTS } from './list-slots.js';
import { MAX_BATCH_REPORTS, PROXY_ID_PATTERN } from './request-parsing.js';
import {
  bodyLimit,
  errorResponse,
  headersTimeoutMs,
  json,
  leasedProxySchema,
  maxHeaderSize,
  proxyDetailSchema,
  proxySchema,
  ref,
  reportRequestProperties,
  requestTimeoutMs,
  sessionKey,
  target,
  ttlSeconds,
  type OpenApiDocument,
} from './openapi-parts.js';

export const openApiComponents: OpenApiDocument['components'] = {
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
        'running ones; in a batch, the item carries it), book_queue_full (the token already has ' +
        '--discovery-book-queue calls waiting for their turn at the lease book: the book runs a few ' +
        'operations at once and serves the tokens waiting in turn, so one token cannot delay the others). ' +
        'Nothing was done; retry after Retry-After seconds.',
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
        exclude: {
          type: 'array',
          maxItems: MAX_EXCLUDED,
          items: { type: 'string', pattern: PROXY_ID_PATTERN.source },
          description:
            'Proxy ids (namespace/name, as proxy.id answers them) not to give: a crawler asking ahead names the ' +
            'proxies it holds, so a grant is always another proxy. Every match excluded (or the rest full) is a ' +
            '409 all_busy. Not with session (a 400); a bad value is a 400 naming exclude.',
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
};

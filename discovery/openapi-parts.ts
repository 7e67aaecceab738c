// The pieces the OpenAPI document (openapi.ts) and its components (openapi-components.ts) are
// built from: the OpenAPI object types, helpers for references and JSON bodies, and the
// parameters and schemas more than one operation uses, each from the constant the code checks.
import { BODY_LIMIT_BYTES } from './json-body.js';
import { REPORT_RESULTS } from '../book/lease-store.js';
import { MAX_RETRY_AFTER_SECONDS, MAX_SESSION_LENGTH } from './request-parsing.js';
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

export interface ResponseObject {
  description: string;
  headers?: Record<string, { description: string; schema: SchemaObject }>;
  content?: Record<string, { schema: SchemaObject }>;
}

export interface ParameterObject {
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

export const json = (schema: SchemaObject) => ({ 'application/json': { schema } });
export const ref = (name: string): SchemaObject => ({ $ref: `#/components/schemas/${name}` });
export const errorResponse = (description: string): ResponseObject => ({
  description,
  content: json(ref('Error')),
});
export const shared = (name: string) => ({ $ref: `#/components/responses/${name}` });
export const leaseID: ParameterObject = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The leaseID returned by POST /v1/leases.',
  schema: { type: 'string' },
};
export const requestID: ParameterObject = {
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
export const target: SchemaObject = {
  type: 'string',
  description:
    'Site the proxy is used against: a host name (stored lower-case, a trailing dot dropped) or an IP ' +
    'address, without scheme, port or path (a URL or host:port is a 400 naming target). Absent = the global pool.',
};
export const sessionKey: SchemaObject = {
  type: 'string',
  minLength: 1,
  maxLength: MAX_SESSION_LENGTH,
  pattern: '^[A-Za-z0-9._:@-]+$',
};
export const ttlSeconds: SchemaObject = {
  type: 'integer',
  minimum: 1,
  description: 'At most the configured maximum (--max-lease-ttl, default 3600).',
};
export const bodyLimit = `${BODY_LIMIT_BYTES / 1024}kb`;
/** One report's fields: the body of POST /v1/leases/{id}/report, and an item of POST /v1/reports. */
export const reportRequestProperties: Record<string, SchemaObject> = {
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
export const proxySchema = {
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
export const proxyDetailSchema: SchemaObject = {
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
export const leasedProxySchema: SchemaObject = {
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

export const proxyID: ParameterObject[] = [
  {
    name: 'namespace',
    in: 'path',
    required: true,
    description: "The Proxy's namespace.",
    schema: { type: 'string' },
  },
  { name: 'name', in: 'path', required: true, description: "The Proxy's name.", schema: { type: 'string' } },
];
export const leaseResponse = (description: string): ResponseObject => ({
  description,
  content: json(ref('Lease')),
});
export const { headersTimeoutMs, requestTimeoutMs, maxHeaderSize } = SERVER_DEFAULTS;

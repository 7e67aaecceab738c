// OpenAPI 3.1 description of the discovery API, served at GET /openapi.json. A test checks
// it against the implementation in both directions, so keep the two in step.

export interface SchemaObject {
  type?: string | string[];
  properties?: Record<string, SchemaObject>;
  required?: string[];
  additionalProperties?: boolean | SchemaObject;
  items?: SchemaObject;
  enum?: readonly (string | number | boolean | null)[];
  format?: string;
  minimum?: number;
  maximum?: number;
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
const target: SchemaObject = {
  type: 'string',
  description:
    'Site the proxy is used against (a host name); compared case-insensitively. Absent = the global pool.',
};

export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'proxy-operator discovery API',
    version: 'v1',
    description:
      'Lists proxies and leases them to crawlers. Leases and cooldowns live in memory: an operator restart drops ' +
      'them, so clients must tolerate a lease vanishing (the proxy keeps working; lease again). A lease whose proxy ' +
      'turns unhealthy or is deleted stays valid until it expires or is released, but that proxy is not leased again.',
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
        summary: 'List proxies, filtered by attributes and health, sorted by id.',
        parameters: [
          {
            name: 'healthy',
            in: 'query',
            description: 'Only healthy (true) or only unhealthy (false) proxies; absent = both.',
            schema: { type: 'string', enum: ['true', 'false'] },
          },
          {
            name: 'attr.{key}',
            in: 'query',
            description:
              'Repeatable for different keys: attr.geo=eu&attr.purpose=crawl keeps proxies whose attributes hold ' +
              'every given key with exactly that value. Any other query parameter is rejected with 400.',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '200': { description: 'Matching proxies.', content: json(ref('ProxyList')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
        },
      },
    },
    '/v1/leases': {
      post: {
        operationId: 'acquireLease',
        summary: 'Lease the least-loaded healthy proxy matching the selector.',
        description:
          'Chooses among healthy proxies with an IP and maxLeases > 0 that match the selector, have a free slot and ' +
          'are not cooling down for the target (a cooldown without target benches the proxy for every lease); ' +
          'fewest active leases first, then lowest latency, then id. The body may be sent with any content type; ' +
          'an empty body leases any proxy for the default TTL.',
        requestBody: { required: false, content: json(ref('LeaseRequest')) },
        responses: {
          '201': { description: 'Lease granted.', content: json(ref('Lease')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '409': errorResponse(
            'No lease: error is no_match (no healthy leasable proxy matches), all_busy (all matches are at maxLeases; ' +
              'retry soon) or all_cooling_down (all matches are cooling down for this target).',
          ),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
        },
      },
    },
    '/v1/leases/{id}': {
      delete: {
        operationId: 'releaseLease',
        summary:
          'Release a lease early. Idempotent: 204 for unknown, expired and already released leases too.',
        parameters: [leaseID],
        responses: {
          '204': { description: 'Released (or already gone).' },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
        },
      },
    },
    '/v1/leases/{id}/report': {
      post: {
        operationId: 'reportLease',
        summary: "Report how the lease's proxy fared against a target.",
        description:
          "rate_limited and banned keep the proxy out of new leases for the target (default: the lease's own " +
          'target) for the configured cooldown; with no target at all the cooldown applies to every lease. ' +
          'ok records nothing. A running cooldown is never shortened.',
        parameters: [leaseID],
        requestBody: { required: true, content: json(ref('ReportRequest')) },
        responses: {
          '200': { description: 'Report recorded.', content: json(ref('ReportResponse')) },
          '400': shared('BadRequest'),
          '401': shared('Unauthorized'),
          '404': errorResponse('lease_not_found: the lease is unknown, expired or released.'),
          '413': shared('PayloadTooLarge'),
          '415': shared('UnsupportedMediaType'),
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
          'The static token from DISCOVERY_TOKEN. When the operator runs without one, auth is off.',
      },
    },
    responses: {
      BadRequest: errorResponse('invalid_request or invalid_json: the message names the offending field.'),
      Unauthorized: {
        description: 'unauthorized: missing or wrong bearer token.',
        headers: { 'WWW-Authenticate': { description: 'Bearer challenge.', schema: { type: 'string' } } },
        content: json(ref('Error')),
      },
      NotFound: errorResponse('not_found: no such route.'),
      MethodNotAllowed: {
        description: 'method_not_allowed: the path exists but not with this method.',
        headers: { Allow: { description: 'The allowed methods.', schema: { type: 'string' } } },
        content: json(ref('Error')),
      },
      PayloadTooLarge: errorResponse('payload_too_large: the body exceeds 16kb.'),
      UnsupportedMediaType: errorResponse('unsupported_media_type: unsupported charset or content encoding.'),
    },
    schemas: {
      Error: {
        type: 'object',
        required: ['error', 'message'],
        additionalProperties: false,
        properties: {
          error: {
            type: 'string',
            enum: [
              'invalid_request',
              'invalid_json',
              'unauthorized',
              'not_found',
              'lease_not_found',
              'method_not_allowed',
              'no_match',
              'all_busy',
              'all_cooling_down',
              'payload_too_large',
              'unsupported_media_type',
              'internal',
            ],
          },
          message: { type: 'string' },
        },
      },
      Attributes: { type: 'object', additionalProperties: { type: 'string' } },
      Proxy: {
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
          activeLeases: { type: 'integer', minimum: 0 },
          maxLeases: { type: 'integer', minimum: 0, description: '0 = list-only, never leased.' },
        },
      },
      LeasedProxy: {
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
          'url',
        ],
        additionalProperties: false,
        properties: {
          id: { type: 'string' },
          ip: { type: 'string' },
          port: { type: 'integer', minimum: 1, maximum: 65535 },
          attributes: ref('Attributes'),
          phase: { type: 'string' },
          healthy: { type: 'boolean' },
          latencyMillis: { type: 'number', minimum: 0 },
          activeLeases: { type: 'integer', minimum: 0 },
          maxLeases: { type: 'integer', minimum: 0 },
          url: { type: 'string', description: 'http://ip:port, ready to use as an HTTP proxy URL.' },
        },
      },
      ProxyList: {
        type: 'object',
        required: ['items'],
        additionalProperties: false,
        properties: { items: { type: 'array', items: ref('Proxy') } },
      },
      LeaseRequest: {
        type: 'object',
        additionalProperties: false,
        properties: {
          selector: {
            ...ref('Attributes'),
            description: 'Attribute equality filter; default {} (any proxy).',
          },
          ttlSeconds: {
            type: 'integer',
            minimum: 1,
            description: 'Default 300; at most the configured maximum (default 3600).',
          },
          target,
        },
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
        },
      },
      ReportRequest: {
        type: 'object',
        required: ['result'],
        additionalProperties: false,
        properties: { result: { type: 'string', enum: ['ok', 'rate_limited', 'banned'] }, target },
      },
      ReportResponse: {
        type: 'object',
        required: ['leaseID', 'proxyID', 'result', 'target', 'cooldownUntil'],
        additionalProperties: false,
        properties: {
          leaseID: { type: 'string' },
          proxyID: { type: 'string' },
          result: { type: 'string', enum: ['ok', 'rate_limited', 'banned'] },
          target: { type: ['string', 'null'], description: 'The cooldown key used; null = the global pool.' },
          cooldownUntil: {
            type: ['string', 'null'],
            format: 'date-time',
            description: 'null when no cooldown started (ok).',
          },
        },
      },
    },
  },
};

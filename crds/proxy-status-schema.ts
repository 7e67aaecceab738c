// The OpenAPI v3 schema of Proxy.status. Every field the operator writes is declared, because
// the API server silently prunes undeclared ones.
import type { JSONSchemaProps } from './openapi-schema.js';
import {
  PROXY_PHASES,
  REPLACEMENT_CAUSES,
  type Condition,
  type ProxyStatus,
  type ReplacementStatus,
} from './proxy-types.js';

/** metav1.Condition, with the validation its Go markers generate. */
const conditionProperties = {
  type: {
    type: 'string',
    maxLength: 316,
    pattern:
      '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    description: 'Condition type: Provisioned or Healthy.',
  },
  status: { type: 'string', enum: ['True', 'False', 'Unknown'], description: 'True, False or Unknown.' },
  reason: {
    type: 'string',
    minLength: 1,
    maxLength: 1024,
    pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    description: 'CamelCase reason for the last transition, for machines (e.g. ProbeFailed, QuotaExceeded).',
  },
  message: {
    type: 'string',
    maxLength: 32768,
    description: 'Human-readable details of the last transition.',
  },
  lastTransitionTime: {
    type: 'string',
    format: 'date-time',
    description: 'When the status last changed from one value to another.',
  },
  observedGeneration: {
    type: 'integer',
    format: 'int64',
    minimum: 0,
    description: 'The metadata.generation the condition was computed from.',
  },
} satisfies Record<keyof Condition, JSONSchemaProps>;

const replacementProperties = {
  cause: {
    type: 'string',
    enum: [...REPLACEMENT_CAUSES],
    description: `Why the proxy is being replaced: ${REPLACEMENT_CAUSES.join(', ')}.`,
  },
  startedAt: {
    type: 'string',
    format: 'date-time',
    description: 'When the old instance was taken out of service.',
  },
  oldInstanceGoneAt: {
    type: 'string',
    format: 'date-time',
    description:
      'When the old instance was found gone; from then on the instance is its replacement (a rotation drains only the old one).',
  },
} satisfies Record<keyof ReplacementStatus, JSONSchemaProps>;

const statusProperties = {
  phase: {
    type: 'string',
    enum: [...PROXY_PHASES],
    description: `Lifecycle phase: ${PROXY_PHASES.join(', ')}.`,
  },
  providerID: {
    type: 'string',
    maxLength: 1024,
    description: 'Opaque ID of the VM at its provider (Managed only); empty until creation starts.',
  },
  ip: {
    type: 'string',
    maxLength: 253,
    description:
      'Address clients and probes use: the external IP of the VM for Managed proxies, spec.endpoint.host for ' +
      'External ones. Changes when a Managed proxy is replaced.',
  },
  conditions: {
    type: 'array',
    maxItems: 16,
    'x-kubernetes-list-type': 'map',
    'x-kubernetes-list-map-keys': ['type'],
    description: 'Provisioned and Healthy conditions, with reasons.',
    items: {
      type: 'object',
      required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
      properties: conditionProperties,
    },
  },
  lastHealthCheckTime: {
    type: 'string',
    format: 'date-time',
    description:
      'Time of the last probe that changed the status. Status is written only on transitions, so this ' +
      'is not the most recent probe; probe recency lives in the metrics.',
  },
  latencyMillis: {
    type: 'integer',
    format: 'int64',
    minimum: 0,
    description: 'Round-trip time of the last status-affecting probe, in milliseconds.',
  },
  exitIP: {
    type: 'string',
    maxLength: 45,
    description:
      "The proxy's egress address as spec.healthCheck.exitIPURL last answered it through the proxy (the " +
      'address target sites see), canonical IPv4 or IPv6. Written only when it changes (an ExitIPChanged ' +
      'Event); kept when a read fails; removed when exitIPURL is.',
  },
  observedGeneration: {
    type: 'integer',
    format: 'int64',
    minimum: 0,
    description: 'The metadata.generation the operator last acted on.',
  },
  replacement: {
    type: 'object',
    required: ['cause', 'startedAt'],
    description:
      'Set while a proxy that served is being replaced, until the new instance is Ready. It holds one of ' +
      "the provider's --max-unavailable slots the whole time, also after a permanently failed create.",
    properties: replacementProperties,
  },
} satisfies Record<keyof ProxyStatus, JSONSchemaProps>;

export const proxyStatusSchema: JSONSchemaProps = {
  type: 'object',
  description: 'Observed state, written only by the operator through the status subresource.',
  properties: statusProperties,
};

// The OpenAPI v3 schema of Proxy.spec, enforced by the API server (no admission webhooks): the
// top level and its small fields; each object field's schema is a module of its own.
// `satisfies Record<keyof X, …>` makes the compiler reject a property the TypeScript types in
// proxy-types.ts lack, or a type property missing here.
import { cloudInitProperties } from './cloud-init-schema.js';
import { endpointProperties } from './endpoint-schema.js';
import { healthCheckProperties } from './health-check-schema.js';
import type { JSONSchemaProps } from './openapi-schema.js';
import { placementProperties } from './placement-schema.js';
import type { ProxySpec } from './proxy-types.js';
import { DEFAULTS, LIMITS } from './proxy-spec-limits.js';
import { rotationProperties } from './rotation-schema.js';
import { DNS_LABEL, port } from './schema-fields.js';
import { specModeRules } from './spec-mode-rules.js';

// The key length bound lives in the regex: a structural schema cannot give map keys a
// maxLength (propertyNames is not allowed), so a CEL rule over the keys is the only place.
const ATTRIBUTE_KEY = `^[A-Za-z0-9]([-A-Za-z0-9_.]{0,${LIMITS.attributeKeyMaxLength - 2}}[A-Za-z0-9])?$`;

const specProperties = {
  mode: {
    type: 'string',
    enum: ['Managed', 'External'],
    description:
      'Managed: the operator creates and deletes the VM through spec.provider. External: the proxy ' +
      'exists elsewhere at spec.endpoint; the operator only health-checks it and offers it for lease. ' +
      'Immutable.',
    'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'spec.mode is immutable' }],
  },
  provider: {
    type: 'string',
    minLength: 1,
    maxLength: 63,
    pattern: DNS_LABEL,
    description:
      'Name of a provider in the providers configuration of the operator (e.g. mock, gcp-eu). Required when ' +
      'mode is Managed, forbidden when External. Immutable.',
  },
  placement: {
    type: 'object',
    description:
      'Where and how big the VM is (Managed only). Providers ignore fields that do not apply to them. ' +
      'Changing it replaces the VM.',
    properties: placementProperties,
  },
  cloudInit: {
    type: 'object',
    description:
      'Cloud-init user-data for the VM (Managed only): exactly one of inline or secretRef. Changing it ' +
      'replaces the VM.',
    properties: cloudInitProperties,
    'x-kubernetes-validations': [
      {
        rule: 'has(self.inline) != has(self.secretRef)',
        message: 'spec.cloudInit must set exactly one of inline or secretRef',
      },
    ],
  },
  endpoint: {
    type: 'object',
    required: ['host', 'port'],
    description: 'Address of an External proxy. Required when mode is External, forbidden when Managed.',
    properties: endpointProperties,
  },
  port: {
    ...port(
      'TCP port the proxy software listens on once a Managed VM is up. Changing it replaces the VM. ' +
        `External proxies use spec.endpoint.port instead. Default ${DEFAULTS.port}.`,
    ),
    default: DEFAULTS.port,
  },
  attributes: {
    type: 'object',
    maxProperties: LIMITS.attributesMaxProperties,
    description:
      'Selection attributes (geo, asn, purpose, ...) that crawler clients filter on in the discovery API ' +
      `(attr.<key>=<value>). At most ${LIMITS.attributesMaxProperties} entries; keys are like label names, ` +
      `values at most ${LIMITS.attributeValueMaxLength} characters.`,
    additionalProperties: { type: 'string', maxLength: LIMITS.attributeValueMaxLength },
    'x-kubernetes-validations': [
      {
        rule: `self.all(k, k.matches(r'${ATTRIBUTE_KEY}'))`,
        message:
          `spec.attributes keys must be 1-${LIMITS.attributeKeyMaxLength} letters, digits, '-', '_' or '.', ` +
          'starting and ending with a letter or digit',
      },
    ],
  },
  healthCheck: {
    type: 'object',
    // An empty default lets the API server fill in every field's own default below.
    default: {},
    description: 'How the operator probes the proxy, through the proxy itself. Every field has a default.',
    properties: healthCheckProperties,
    'x-kubernetes-validations': [
      {
        // The API server checks `default: {}` against this rule before filling in the nested
        // defaults; in stored objects both fields are always present.
        rule: '!has(self.timeoutSeconds) || !has(self.intervalSeconds) || self.timeoutSeconds < self.intervalSeconds',
        message: 'spec.healthCheck.timeoutSeconds must be less than spec.healthCheck.intervalSeconds',
        fieldPath: '.timeoutSeconds',
      },
    ],
  },
  maxLeases: {
    type: 'integer',
    format: 'int32',
    minimum: 0,
    maximum: LIMITS.maxLeasesMaximum,
    default: DEFAULTS.maxLeases,
    description:
      'Most leases the discovery API hands out for this proxy at once. 0 makes it list-only (never ' +
      `leased). Default ${DEFAULTS.maxLeases}.`,
  },
  rotation: {
    type: 'object',
    // As healthCheck: an empty default lets each field's own default (if any) be filled in.
    default: {},
    description:
      'When the operator replaces this proxy by itself (the autopilot). Every replacement is paced by ' +
      '--max-unavailable and explained by an Event.',
    properties: rotationProperties,
  },
} satisfies Record<keyof ProxySpec, JSONSchemaProps>;

export const proxySpecSchema: JSONSchemaProps = {
  type: 'object',
  required: ['mode'],
  description:
    'Desired state of the proxy. Proxies are immutable cattle: changing placement, cloudInit or port of a ' +
    'Managed proxy deletes its VM and creates a new one with a new IP; mode and provider never change.',
  properties: specProperties,
  'x-kubernetes-validations': specModeRules,
};

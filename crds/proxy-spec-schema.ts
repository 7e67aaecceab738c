// The OpenAPI v3 schema of Proxy.spec, enforced by the API server (no admission webhooks).
// `satisfies Record<keyof X, …>` makes the compiler reject a property the TypeScript types in
// proxy-types.ts lack, or a type property missing here.
import {
  HOST_CEL_RULE,
  HOST_RULE_TEXT,
  URL_ANGLE_BRACKET,
  URL_GOOD_PORT,
  URL_HAS_PORT,
  URL_IPV4_HOST,
  URL_NUMERIC_HOST,
  URL_ZONE,
} from './endpoint-host.js';
import type { JSONSchemaProps, ValidationRule } from './openapi-schema.js';
import type {
  CloudInitSpec,
  EndpointSpec,
  HealthCheckSpec,
  LocalSecretReference,
  PlacementSpec,
  ProxySpec,
  RotationSpec,
  SecretKeySelector,
} from './proxy-types.js';
import { CREDENTIALS_SECRET_LABEL, PASSWORD_KEY, USERNAME_KEY } from './proxy-credentials.js';

/** Limits the schema enforces; exported so tests and docs state the same numbers. */
export const LIMITS = {
  /** GCP caps one metadata value at 256 KiB; anything near that belongs in a Secret, not in etcd. */
  cloudInitInlineMaxLength: 32 * 1024,
  attributesMaxProperties: 32,
  attributeKeyMaxLength: 63,
  attributeValueMaxLength: 253,
  maxLeasesMaximum: 1000,
  intervalSecondsMinimum: 2,
  intervalSecondsMaximum: 3600,
  timeoutSecondsMaximum: 300,
  thresholdMaximum: 100,
  expectedStatusCodesMaxItems: 16,
  probeURLMaxLength: 2048,
  hostMaxLength: 253,
  /** A week: longer than any outage worth waiting out, short enough to catch a typo'd unit. */
  unhealthyAfterSecondsMaximum: 7 * 24 * 3600,
  /** A rotation younger than 5 minutes would spend the budget on churn; a year is plenty. */
  maxAgeSecondsMinimum: 300,
  maxAgeSecondsMaximum: 365 * 24 * 3600,
  /** More targets than any one crawl would have banned at once. */
  whenCoolingDownOnMaximum: 10_000,
} as const;

export const DEFAULTS = {
  port: 3128,
  maxLeases: 5,
  probeURL: 'https://www.gstatic.com/generate_204',
  intervalSeconds: 30,
  timeoutSeconds: 5,
  failureThreshold: 3,
  successThreshold: 1,
  expectedStatusCodes: [200, 204],
} as const;

const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
// The key length bound lives in the regex: a structural schema cannot give map keys a
// maxLength (propertyNames is not allowed), so a CEL rule over the keys is the only place.
const ATTRIBUTE_KEY = `^[A-Za-z0-9]([-A-Za-z0-9_.]{0,${LIMITS.attributeKeyMaxLength - 2}}[A-Za-z0-9])?$`;

const port = (description: string): JSONSchemaProps => ({
  type: 'integer',
  format: 'int32',
  minimum: 1,
  maximum: 65535,
  description,
});

const placementProperties = {
  region: {
    type: 'string',
    minLength: 1,
    maxLength: 63,
    description:
      'Provider region to create the VM in, e.g. europe-west1. Providers that place by zone ignore it.',
  },
  zone: {
    type: 'string',
    minLength: 1,
    maxLength: 63,
    description: 'Provider zone to create the VM in, e.g. europe-west1-b. Required by the gcp provider.',
  },
  machineType: {
    type: 'string',
    minLength: 1,
    maxLength: 253,
    description: 'Provider machine type (VM size), e.g. e2-micro. Required by the gcp provider.',
  },
  image: {
    type: 'string',
    minLength: 1,
    maxLength: 1024,
    description:
      'Boot image, in the provider notation, e.g. projects/debian-cloud/global/images/family/debian-12 ' +
      'for gcp or a container image for the kubernetes provider.',
  },
} satisfies Record<keyof PlacementSpec, JSONSchemaProps>;

const secretKeySelectorProperties = {
  name: {
    type: 'string',
    minLength: 1,
    maxLength: 253,
    pattern: DNS_SUBDOMAIN,
    description:
      'Name of a Secret in the namespace of the Proxy. The Secret must carry the label ' +
      'crawl.example.com/cloud-init: "true", or the operator cannot see it.',
  },
  key: {
    type: 'string',
    minLength: 1,
    maxLength: 253,
    pattern: '^[-._a-zA-Z0-9]+$',
    description: 'Key within the Secret whose value is the cloud-init user-data.',
  },
} satisfies Record<keyof SecretKeySelector, JSONSchemaProps>;

const cloudInitProperties = {
  inline: {
    type: 'string',
    maxLength: LIMITS.cloudInitInlineMaxLength,
    description: `Cloud-init user-data written in the Proxy itself (at most ${LIMITS.cloudInitInlineMaxLength} characters; use secretRef for more).`,
  },
  secretRef: {
    type: 'object',
    required: ['name', 'key'],
    description:
      'Reads the cloud-init user-data from a key of a labelled Secret. Rotating its content replaces the VM.',
    properties: secretKeySelectorProperties,
  },
} satisfies Record<keyof CloudInitSpec, JSONSchemaProps>;

const credentialsSecretRefProperties = {
  name: {
    type: 'string',
    minLength: 1,
    maxLength: 253,
    description: 'Name of the Secret in the namespace of the Proxy.',
    'x-kubernetes-validations': [
      {
        rule: `self.matches(r'${DNS_SUBDOMAIN}')`,
        message:
          'spec.endpoint.credentialsSecretRef.name must be a Secret name: lower-case letters, digits, ' +
          "'-' and '.', starting and ending with a letter or digit",
      },
    ],
  },
} satisfies Record<keyof LocalSecretReference, JSONSchemaProps>;

const endpointProperties = {
  host: {
    type: 'string',
    minLength: 1,
    maxLength: LIMITS.hostMaxLength,
    description: `Address of the external proxy: ${HOST_RULE_TEXT}.`,
    'x-kubernetes-validations': [
      { rule: HOST_CEL_RULE, message: `spec.endpoint.host must be ${HOST_RULE_TEXT}` },
    ],
  },
  port: port('TCP port the external proxy listens on, 1-65535.'),
  credentialsSecretRef: {
    type: 'object',
    required: ['name'],
    description:
      'Optional basic-auth credentials the external proxy requires: a Secret (type kubernetes.io/basic-auth) ' +
      `with the keys ${USERNAME_KEY} and ${PASSWORD_KEY}, labelled ${CREDENTIALS_SECRET_LABEL}: "true" so the ` +
      'operator sees it. Probes send them and the discovery API hands them out with every lease; editing the ' +
      'Secret takes effect without replacing anything.',
    properties: credentialsSecretRefProperties,
  },
} satisfies Record<keyof EndpointSpec, JSONSchemaProps>;

/** The URL rules of a healthCheck URL field, with messages naming it. */
function urlRules(field: 'probeURL' | 'exitIPURL'): ValidationRule[] {
  return [
    {
      rule: "isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",
      message: `spec.healthCheck.${field} must be an absolute http:// or https:// URL with a host`,
    },
    // Go's URL parser (CEL's url()) takes what the operator's WHATWG parser refuses or reads
    // differently: any run of port digits, an IPv6 zone id, numeric hosts. These rules read
    // `self` (bounded by maxLength) with regexes over the URL's authority, because strings
    // that url() returns have no size bound and the cost estimate of a regex over them exceeds
    // the budget. Each is guarded by isURL, so a malformed URL gets only the message above.
    {
      rule: `!isURL(self) || !self.matches(r'${URL_HAS_PORT}') || self.matches(r'${URL_GOOD_PORT}')`,
      message: `spec.healthCheck.${field} port must be 1-65535 without leading zeros`,
    },
    {
      rule: `!isURL(self) || !self.matches(r'${URL_ZONE}')`,
      message: `spec.healthCheck.${field} must not carry an IPv6 zone id`,
    },
    {
      rule: `!isURL(self) || !self.matches(r'${URL_ANGLE_BRACKET}')`,
      message: `spec.healthCheck.${field} host must not contain '<' or '>'`,
    },
    {
      rule: `!isURL(self) || !self.matches(r'${URL_NUMERIC_HOST}') || self.matches(r'${URL_IPV4_HOST}')`,
      message: `spec.healthCheck.${field} host must be an IP address in canonical form or a DNS name whose last label is not a number`,
    },
  ];
}

const healthCheckProperties = {
  probeURL: {
    type: 'string',
    maxLength: LIMITS.probeURLMaxLength,
    default: DEFAULTS.probeURL,
    description:
      'URL fetched through the proxy (a real CONNECT for https) on every probe. A proxy that accepts ' +
      `connections but cannot reach this URL is unhealthy. Default ${DEFAULTS.probeURL}.`,
    'x-kubernetes-validations': urlRules('probeURL'),
  },
  intervalSeconds: {
    type: 'integer',
    format: 'int32',
    minimum: LIMITS.intervalSecondsMinimum,
    maximum: LIMITS.intervalSecondsMaximum,
    default: DEFAULTS.intervalSeconds,
    description: `Seconds between two probes of this proxy, ${LIMITS.intervalSecondsMinimum}-${LIMITS.intervalSecondsMaximum}. Default ${DEFAULTS.intervalSeconds}.`,
  },
  timeoutSeconds: {
    type: 'integer',
    format: 'int32',
    minimum: 1,
    maximum: LIMITS.timeoutSecondsMaximum,
    default: DEFAULTS.timeoutSeconds,
    description: `Seconds one probe may take before it counts as failed; must be less than intervalSeconds. Default ${DEFAULTS.timeoutSeconds}.`,
  },
  failureThreshold: {
    type: 'integer',
    format: 'int32',
    minimum: 1,
    maximum: LIMITS.thresholdMaximum,
    default: DEFAULTS.failureThreshold,
    description: `Consecutive failed probes that turn a healthy proxy unhealthy. Default ${DEFAULTS.failureThreshold}.`,
  },
  successThreshold: {
    type: 'integer',
    format: 'int32',
    minimum: 1,
    maximum: LIMITS.thresholdMaximum,
    default: DEFAULTS.successThreshold,
    description: `Consecutive successful probes that turn an unhealthy proxy healthy. Default ${DEFAULTS.successThreshold}.`,
  },
  expectedStatusCodes: {
    type: 'array',
    minItems: 1,
    maxItems: LIMITS.expectedStatusCodesMaxItems,
    'x-kubernetes-list-type': 'set',
    default: [...DEFAULTS.expectedStatusCodes],
    description: `HTTP status codes of the probe URL that count as success. Default [${DEFAULTS.expectedStatusCodes.join(', ')}].`,
    items: { type: 'integer', format: 'int32', minimum: 100, maximum: 599 },
  },
  exitIPURL: {
    type: 'string',
    maxLength: LIMITS.probeURLMaxLength,
    // No default: reading the exit IP is a second request through the proxy, opt-in.
    description:
      "Optional URL of an echo service that answers with the caller's address, as plain text or JSON " +
      '{"ip": "<address>"} (e.g. https://api.ipify.org, https://checkip.amazonaws.com). When set, the operator ' +
      'reads it through the proxy after a successful probe (the first at an address, then at most once a ' +
      'minute) and records the answer in status.exitIP; a change is an ExitIPChanged Event. A failed read ' +
      'never makes the proxy unhealthy: the last exit IP stays.',
    'x-kubernetes-validations': urlRules('exitIPURL'),
  },
} satisfies Record<keyof HealthCheckSpec, JSONSchemaProps>;

const rotationProperties = {
  unhealthyAfterSeconds: {
    type: 'integer',
    format: 'int32',
    minimum: 0,
    maximum: LIMITS.unhealthyAfterSecondsMaximum,
    // No schema default on purpose: unset means the fleet's --replace-unhealthy-after, which a
    // stored default would hide.
    description:
      'Replace a Managed proxy that has been Unhealthy for this many seconds: a new instance, a new IP, ' +
      'the same name, paced by --max-unavailable. 0 never replaces; unset takes the operator flag ' +
      '--replace-unhealthy-after. An External proxy is never touched: it only gets a Warning Event.',
  },
  maxAgeSeconds: {
    type: 'integer',
    format: 'int32',
    // No schema default: unset is off. 0 is off too; otherwise at least 5 minutes.
    minimum: 0,
    maximum: LIMITS.maxAgeSecondsMaximum,
    'x-kubernetes-validations': [
      {
        rule: `self == 0 || self >= ${LIMITS.maxAgeSecondsMinimum}`,
        message: `spec.rotation.maxAgeSeconds must be 0 (off) or at least ${LIMITS.maxAgeSecondsMinimum}`,
      },
    ],
    description:
      'Rotate a Managed proxy once its instance is this many seconds old (since it came up), up to 10 % ' +
      'earlier by a per-instance jitter so a fleet created at once does not rotate at once: it is first ' +
      'drained (no new leases nor session bindings; live leases run until their TTL or ' +
      '--rotation-drain-timeout), then replaced (a new instance and IP, the same name), paced by ' +
      `--max-unavailable. 0 or unset: never. 0 or ${LIMITS.maxAgeSecondsMinimum} to ${LIMITS.maxAgeSecondsMaximum}. ` +
      'Ignored for External proxies.',
  },
  whenCoolingDownOn: {
    type: 'integer',
    format: 'int32',
    // No schema default: unset is off (a stored default would rotate every proxy on bans).
    maximum: LIMITS.whenCoolingDownOnMaximum,
    'x-kubernetes-validations': [
      {
        rule: 'self >= 1',
        message: 'spec.rotation.whenCoolingDownOn must be at least 1 (leave it unset for off)',
      },
    ],
    description:
      'Rotate when the proxy is cooling down on at least this many targets at once (bans and rate limits ' +
      'reported through the discovery API, counted only if they end at least --cooldown after the ' +
      'instance came up). A Managed proxy is drained and replaced like a rotation on age (a new IP, the ' +
      'same name, paced by --max-unavailable); an External one gets Provisioned reason RotationDue and a ' +
      `Warning Event: its owner must act. 1 to ${LIMITS.whenCoolingDownOnMaximum}; unset: never.`,
  },
} satisfies Record<keyof RotationSpec, JSONSchemaProps>;

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

// "Unless Managed" / "unless External": each rule states one implication of the mode.
const notManaged = "self.mode != 'Managed'";
const notExternal = "self.mode != 'External'";
// On an update that changes the mode, spec.mode's own rule is the one mistake to report: the
// fields that go with the new mode are not a second and third one. `optionalOldSelf` makes
// these rules run on create too, where oldSelf has no value.
const modeChanged = 'oldSelf.hasValue() && oldSelf.value().mode != self.mode';
const modeRule = (rule: Omit<ValidationRule, 'optionalOldSelf'>): ValidationRule => ({
  ...rule,
  rule: `${modeChanged} || ${rule.rule}`,
  optionalOldSelf: true,
});

export const proxySpecSchema: JSONSchemaProps = {
  type: 'object',
  required: ['mode'],
  description:
    'Desired state of the proxy. Proxies are immutable cattle: changing placement, cloudInit or port of a ' +
    'Managed proxy deletes its VM and creates a new one with a new IP; mode and provider never change.',
  properties: specProperties,
  'x-kubernetes-validations': [
    modeRule({
      rule: `${notManaged} || has(self.provider)`,
      message: 'spec.provider is required when spec.mode is Managed',
      fieldPath: '.provider',
      reason: 'FieldValueRequired',
    }),
    modeRule({
      rule: `${notExternal} || !has(self.provider)`,
      message:
        'spec.provider must not be set when spec.mode is External (the operator does not provision it)',
      fieldPath: '.provider',
      reason: 'FieldValueForbidden',
    }),
    modeRule({
      rule: `${notExternal} || has(self.endpoint)`,
      message: 'spec.endpoint is required when spec.mode is External',
      fieldPath: '.endpoint',
      reason: 'FieldValueRequired',
    }),
    modeRule({
      rule: `${notManaged} || !has(self.endpoint)`,
      message: 'spec.endpoint must not be set when spec.mode is Managed (the provider assigns the address)',
      fieldPath: '.endpoint',
      reason: 'FieldValueForbidden',
    }),
    modeRule({
      rule: `${notExternal} || !has(self.placement)`,
      message: 'spec.placement applies only when spec.mode is Managed',
      fieldPath: '.placement',
      reason: 'FieldValueForbidden',
    }),
    modeRule({
      rule: `${notExternal} || !has(self.cloudInit)`,
      message: 'spec.cloudInit applies only when spec.mode is Managed',
      fieldPath: '.cloudInit',
      reason: 'FieldValueForbidden',
    }),
    {
      // A mode change is reported by spec.mode's own rule; it brings or drops the provider,
      // which is not a second mistake.
      rule:
        'self.mode != oldSelf.mode || has(self.provider) == has(oldSelf.provider) && ' +
        '(!has(self.provider) || self.provider == oldSelf.provider)',
      message: 'spec.provider is immutable: create a new Proxy to use another provider',
      fieldPath: '.provider',
    },
  ],
};

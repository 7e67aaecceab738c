// The schema of spec.healthCheck: how the operator probes a proxy through itself, and the CEL
// rules that hold its URLs to what the operator's own URL parser reads the same way.
import {
  URL_ANGLE_BRACKET,
  URL_GOOD_PORT,
  URL_HAS_PORT,
  URL_IPV4_HOST,
  URL_NUMERIC_HOST,
  URL_ZONE,
} from './endpoint-host.js';
import type { JSONSchemaProps, ValidationRule } from './openapi-schema.js';
import type { HealthCheckSpec } from './proxy-types.js';
import { DEFAULTS, LIMITS } from './proxy-spec-limits.js';

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

export const healthCheckProperties = {
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

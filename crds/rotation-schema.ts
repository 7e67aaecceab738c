// The schema of spec.rotation: when the autopilot replaces a proxy by itself.
import type { JSONSchemaProps } from './openapi-schema.js';
import type { RotationSpec } from './proxy-types.js';
import { LIMITS } from './proxy-spec-limits.js';

export const rotationProperties = {
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

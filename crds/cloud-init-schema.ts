// The schema of spec.cloudInit: a Managed proxy's user-data, inline or from a labelled Secret.
import type { JSONSchemaProps } from './openapi-schema.js';
import type { CloudInitSpec, SecretKeySelector } from './proxy-types.js';
import { LIMITS } from './proxy-spec-limits.js';
import { DNS_SUBDOMAIN } from './schema-fields.js';

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

export const cloudInitProperties = {
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

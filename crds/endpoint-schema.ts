// The schema of spec.endpoint: an External proxy's address and its optional credentials.
import { HOST_CEL_RULE, HOST_RULE_TEXT } from './endpoint-host.js';
import type { JSONSchemaProps } from './openapi-schema.js';
import type { EndpointSpec, LocalSecretReference } from './proxy-types.js';
import { CREDENTIALS_SECRET_LABEL, PASSWORD_KEY, USERNAME_KEY } from './proxy-credentials.js';
import { LIMITS } from './proxy-spec-limits.js';
import { DNS_SUBDOMAIN, port } from './schema-fields.js';

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

export const endpointProperties = {
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
      'operator sees it, and not a Secret the operator made for another Proxy (owned by it). Probes send them ' +
      'and the discovery API hands them out with every lease; editing the Secret takes effect without replacing ' +
      'anything.',
    properties: credentialsSecretRefProperties,
  },
} satisfies Record<keyof EndpointSpec, JSONSchemaProps>;

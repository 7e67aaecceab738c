// Field shapes more than one part of the Proxy spec schema uses: Kubernetes names and ports.
import type { JSONSchemaProps } from './openapi-schema.js';

/** A DNS-1123 label (provider names). */
export const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** A DNS-1123 subdomain (Secret names). */
export const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

export const port = (description: string): JSONSchemaProps => ({
  type: 'integer',
  format: 'int32',
  minimum: 1,
  maximum: 65535,
  description,
});

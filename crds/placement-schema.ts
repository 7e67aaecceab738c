// The schema of spec.placement: where and how big a Managed proxy's instance is.
import type { JSONSchemaProps } from './openapi-schema.js';
import type { PlacementSpec } from './proxy-types.js';

export const placementProperties = {
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

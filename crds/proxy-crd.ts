// The Proxy CustomResourceDefinition, as applied to the cluster (charts/ synthesizes it into dist/).
import type { CustomResourceDefinition } from './openapi-schema.js';
import { proxySpecSchema } from './proxy-spec-schema.js';
import { proxyStatusSchema } from './proxy-status-schema.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  GROUP,
  KIND,
  PLURAL,
  SHORT_NAME,
  SINGULAR,
  VERSION,
} from './proxy-types.js';

export const PROXY_CRD_NAME = `${PLURAL}.${GROUP}`;

export const proxyCrd: CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: PROXY_CRD_NAME, labels: { 'app.kubernetes.io/part-of': 'proxy-operator' } },
  spec: {
    group: GROUP,
    // Namespaced: the fleet lives in one namespace, which keeps RBAC simple.
    scope: 'Namespaced',
    names: {
      kind: KIND,
      listKind: `${KIND}List`,
      plural: PLURAL,
      singular: SINGULAR,
      shortNames: [SHORT_NAME],
      categories: ['crawl'],
    },
    versions: [
      {
        name: VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: 'Mode', type: 'string', jsonPath: '.spec.mode', description: 'Managed or External.' },
          {
            name: 'Provider',
            type: 'string',
            jsonPath: '.spec.provider',
            description: 'Provider of a Managed proxy.',
          },
          { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Lifecycle phase.' },
          { name: 'IP', type: 'string', jsonPath: '.status.ip', description: 'Address clients use.' },
          {
            name: 'Healthy',
            type: 'string',
            jsonPath: `.status.conditions[?(@.type=="${CONDITION_HEALTHY}")].status`,
            description: 'Status of the Healthy condition.',
          },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          // `-o wide` only: why a proxy is what it is, without `describe`.
          {
            name: 'Health-Reason',
            type: 'string',
            priority: 1,
            jsonPath: `.status.conditions[?(@.type=="${CONDITION_HEALTHY}")].reason`,
            description: 'Reason of the Healthy condition (ProbeSucceeded, ConnectionRefused, ...).',
          },
          {
            name: 'Exit-IP',
            type: 'string',
            priority: 1,
            jsonPath: '.status.exitIP',
            description: 'Egress address target sites see (spec.healthCheck.exitIPURL).',
          },
          {
            name: 'Provisioned-Reason',
            type: 'string',
            priority: 1,
            jsonPath: `.status.conditions[?(@.type=="${CONDITION_PROVISIONED}")].reason`,
            description:
              'Reason of the Provisioned condition (InstanceRunning, ReplacementPending, ReplacementBlocked, ...).',
          },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description:
              'An HTTP egress proxy for crawlers: a VM the operator provisions through a provider (Managed) or ' +
              'an existing proxy it only tracks (External). The operator health-checks every proxy through the ' +
              'proxy itself and leases healthy ones to crawler clients through its discovery API.',
            required: ['spec'],
            properties: {
              apiVersion: {
                type: 'string',
                description:
                  'APIVersion defines the versioned schema of this representation of an object. More info: ' +
                  'https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources',
              },
              kind: {
                type: 'string',
                description:
                  'Kind is a string value representing the REST resource this object represents. More info: ' +
                  'https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds',
              },
              metadata: { type: 'object' },
              spec: proxySpecSchema,
              status: proxyStatusSchema,
            },
          },
        },
      },
    ],
  },
};

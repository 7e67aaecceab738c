// The kind the handler examples of docs/framework.md reconcile: a Greeting names someone and,
// optionally, the ConfigMap that holds the salutation.
import type { KindRef, KubeObject } from '../../framework/index.js';

export const GROUP = 'examples.framework.example.com';

export const GREETING: KindRef = {
  group: GROUP,
  version: 'v1',
  plural: 'greetings',
  kind: 'Greeting',
  namespaced: true,
};

export const CONFIGMAP: KindRef = {
  group: '',
  version: 'v1',
  plural: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
};

export interface Greeting extends KubeObject {
  spec: { name?: string; salutationFrom?: string };
  status?: { message?: string };
}

export interface SalutationConfigMap extends KubeObject {
  data?: { salutation?: string };
}

/** ConfigMaps carrying this label are watched for salutations. */
export const SALUTATION_LABEL = `${GROUP}/salutation`;

/** The CustomResourceDefinition to apply before running the examples. */
export const GREETING_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `greetings.${GROUP}` },
  spec: {
    group: GROUP,
    scope: 'Namespaced',
    names: { plural: 'greetings', singular: 'greeting', kind: 'Greeting', listKind: 'GreetingList' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
              status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
            },
          },
        },
      },
    ],
  },
};

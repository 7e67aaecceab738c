// The kind the handler examples of docs/framework.md reconcile: a Greeting names someone and,
// optionally, the ConfigMap that holds the salutation.
import type { KindRef, KubeObject } from '../../framework/index.js';
import { schemalessCrd } from '../../framework/testing/schemaless-crd.js';

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
export const GREETING_CRD = schemalessCrd(GREETING);

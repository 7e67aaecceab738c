import type { KindRef } from '../core/types.js';

/**
 * A CustomResourceDefinition for `kind` whose spec and status take any fields, with the
 * status subresource: enough to exercise handlers against a real API server before (or
 * without) writing the kind's schema.
 */
export function schemalessCrd(kind: KindRef) {
  const singular = kind.kind.toLowerCase();
  const anything = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${kind.plural}.${kind.group}` },
    spec: {
      group: kind.group,
      scope: kind.namespaced ? 'Namespaced' : 'Cluster',
      names: { plural: kind.plural, singular, kind: kind.kind, listKind: `${kind.kind}List` },
      versions: [
        {
          name: kind.version,
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: { type: 'object', properties: { spec: anything, status: anything } },
          },
        },
      ],
    },
  };
}

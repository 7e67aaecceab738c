import { GROUP, PLURAL } from '../crds/proxy-types.js';

/**
 * Where a permission applies: every namespace (a ClusterRole), only the operator's own
 * namespace, or only the kubernetes provider's namespace (namespaced Roles).
 */
export type PermissionScope = 'cluster' | 'operator-namespace' | 'proxies-namespace';

export interface Permission {
  scope: PermissionScope;
  /** '' is the core API group. */
  apiGroup: string;
  resource: string;
  verbs: readonly string[];
  /** Only these objects (RBAC resourceNames); every object of the resource when unset. */
  resourceName?: string;
  /** The code path that needs it: a verb with no caller does not belong here. */
  why: string;
}

/**
 * Everything the operator does in the API, derived from the requests its code makes. The
 * RBAC chart renders exactly this table; test/charts/rbac.int.test.ts checks the outcome.
 */
export const OPERATOR_PERMISSIONS: readonly Permission[] = [
  {
    scope: 'cluster',
    apiGroup: GROUP,
    resource: PLURAL,
    verbs: ['list', 'watch', 'patch'],
    why: 'the informer lists and watches Proxies in every namespace; finalizers and the spec-hash annotation are merge patches',
  },
  {
    scope: 'cluster',
    apiGroup: GROUP,
    resource: `${PLURAL}/status`,
    verbs: ['patch'],
    why: 'status is written with merge patches only (phase, ip, conditions)',
  },
  {
    scope: 'cluster',
    apiGroup: '',
    resource: 'secrets',
    verbs: ['list', 'watch', 'create'],
    why:
      'cloud-init and credentials Secrets live in the namespaces of their Proxies; the informers select them by ' +
      'the labels crawl.example.com/cloud-init=true and crawl.example.com/proxy-credentials=true, but RBAC cannot ' +
      "restrict by label, so this reads every Secret; a Managed proxy's credentials Secret is created (owned by " +
      'the Proxy, deleted by the garbage collector), never updated',
  },
  {
    scope: 'cluster',
    apiGroup: '',
    resource: 'events',
    verbs: ['create'],
    why: 'Events are posted in the namespace of the Proxy they are about, never updated',
  },
  {
    scope: 'cluster',
    apiGroup: '',
    resource: 'namespaces',
    resourceName: 'kube-system',
    verbs: ['get'],
    why:
      'without --cluster-name the operator reads the kube-system Namespace once at start-up: its UID is ' +
      "the cluster's stable owner identity on every instance it creates (the orphan sweep's owner scope)",
  },
  {
    scope: 'operator-namespace',
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    verbs: ['get', 'create', 'update'],
    why: 'leader election reads, creates and renews (PUT) its Lease in the operator namespace',
  },
  {
    scope: 'proxies-namespace',
    apiGroup: '',
    resource: 'pods',
    verbs: ['get', 'list', 'create', 'delete'],
    why: 'the kubernetes provider creates, reads, lists (orphan sweep) and deletes its Squid Pods',
  },
];

import { CREDENTIALS_KEY_SECRET } from '../crds/proxy-credentials.js';
import { GROUP, PLURAL } from '../crds/proxy-types.js';

/**
 * The parts one image runs (handlers/components.ts; charts may not import handlers, a unit
 * test holds the two lists equal). Each gets its own ServiceAccount where it runs alone.
 */
export const COMPONENTS = ['controller', 'discovery', 'gateway'] as const;
export type Component = (typeof COMPONENTS)[number];

/**
 * Where a permission applies. cluster: a ClusterRole (never for Secrets; a unit test holds
 * it). watched-namespace: the namespace of --watch-namespace, where the Proxies, their
 * Secrets and their Events live. operator-namespace: the operator's own (its Lease).
 * proxies-namespace: each namespace the providers config puts kubernetes-provider Pods in.
 */
export type PermissionScope = 'cluster' | 'watched-namespace' | 'operator-namespace' | 'proxies-namespace';

export interface Permission {
  /** The components whose code makes these requests. */
  components: readonly Component[];
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
 * Everything each component does in the API, derived from the requests its code makes. The
 * RBAC chart renders exactly this table; test/charts/component-accounts.int.test.ts runs each
 * component under its own account on a real control plane, records every request, and fails
 * on a refused request or on a verb here that no request used.
 */
export const OPERATOR_PERMISSIONS: readonly Permission[] = [
  {
    components: ['controller', 'discovery', 'gateway'],
    scope: 'watched-namespace',
    apiGroup: GROUP,
    resource: PLURAL,
    verbs: ['list', 'watch'],
    why: 'the informer lists and watches Proxies (the controller reconciles them, the discovery API and the gateway catalog them)',
  },
  {
    components: ['controller'],
    scope: 'watched-namespace',
    apiGroup: GROUP,
    resource: PLURAL,
    verbs: ['patch'],
    why: 'finalizers and the spec-hash annotation are merge patches',
  },
  {
    components: ['controller'],
    scope: 'watched-namespace',
    apiGroup: GROUP,
    resource: `${PLURAL}/status`,
    verbs: ['patch'],
    why: 'status is written with merge patches only (phase, ip, conditions)',
  },
  {
    components: ['controller', 'discovery', 'gateway'],
    scope: 'watched-namespace',
    apiGroup: '',
    resource: 'secrets',
    verbs: ['list', 'watch'],
    why:
      'the informers select cloud-init (controller) and credentials (controller, discovery and gateway: a lease ' +
      'carries them, the gateway adds them upstream) Secrets by the labels crawl.example.com/cloud-init=true and crawl.example.com/proxy-credentials in (true,in-use) (the proxies’ own and the copies in use); ' +
      'RBAC cannot restrict by label, so keep unrelated Secrets out of the Proxies’ namespace',
  },
  {
    components: ['controller'],
    scope: 'watched-namespace',
    apiGroup: '',
    resource: 'secrets',
    verbs: ['create'],
    why: "a Managed proxy's credentials Secret is created (owned by the Proxy, deleted by the garbage collector), never updated",
  },
  {
    components: ['controller'],
    scope: 'watched-namespace',
    apiGroup: '',
    resource: 'events',
    verbs: ['create'],
    why: 'Events are posted in the namespace of the Proxy they are about, never updated',
  },
  {
    components: ['controller'],
    scope: 'cluster',
    apiGroup: '',
    resource: 'namespaces',
    resourceName: 'kube-system',
    verbs: ['get'],
    why:
      'without --cluster-name the controller reads the kube-system Namespace once at start-up: its UID is ' +
      "the cluster's stable owner identity on every instance it creates (the orphan sweep's owner scope)",
  },
  {
    components: ['controller'],
    scope: 'operator-namespace',
    apiGroup: 'coordination.k8s.io',
    resource: 'leases',
    verbs: ['get', 'create', 'update'],
    why: 'leader election reads, creates and renews (PUT) its Lease in the operator namespace',
  },
  {
    components: ['controller'],
    scope: 'operator-namespace',
    apiGroup: '',
    resource: 'secrets',
    resourceName: CREDENTIALS_KEY_SECRET,
    verbs: ['get'],
    why: 'the controller reads the key its credentials digests on Proxies are keyed with, once at start-up (that Secret only)',
  },
  {
    components: ['controller'],
    scope: 'operator-namespace',
    apiGroup: '',
    resource: 'secrets',
    verbs: ['create'],
    why:
      'the first start creates that key Secret (immutable, never updated); RBAC cannot restrict create by name, ' +
      'so this is create on any Secret of the operator namespace, no read, update or delete',
  },
  {
    components: ['controller'],
    scope: 'proxies-namespace',
    apiGroup: '',
    resource: 'pods',
    verbs: ['get', 'list', 'create', 'delete'],
    why: 'the kubernetes provider creates, reads, lists (orphan sweep) and deletes its Squid Pods',
  },
];

/** The rows one ServiceAccount gets: the union of its components' rows. */
export function permissionsOf(components: readonly Component[]): Permission[] {
  return OPERATOR_PERMISSIONS.filter((p) => p.components.some((c) => components.includes(c)));
}

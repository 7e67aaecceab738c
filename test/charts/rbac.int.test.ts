import { AuthorizationV1Api, type V1ResourceAttributes } from '@kubernetes/client-node';
import {
  DEFAULT_WATCH_NAMESPACE,
  DISCOVERY_SERVICE_ACCOUNT_NAME,
  GATEWAY_SERVICE_ACCOUNT_NAME,
  OPERATOR_NAMESPACE,
  PROXIES_NAMESPACE,
  SERVICE_ACCOUNT_NAME,
} from '../../charts/names.js';
import { GROUP, PLURAL } from '../../crds/proxy-types.js';
import { testKubeConfig } from '../harness/kube.js';
import { distObjects } from './manifests.js';
import { ServerSideApply } from './server-side-apply.js';

const kc = testKubeConfig();
const authorization = kc.makeApiClient(AuthorizationV1Api);
const api = new ServerSideApply(kc, 'proxy-operator-rbac-test');
const RBAC_KINDS = [
  'Namespace',
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
];

/** What the API server authorizes for a ServiceAccount's token (the operator's by default). */
async function operatorMay(
  attributes: V1ResourceAttributes,
  account = SERVICE_ACCOUNT_NAME,
): Promise<boolean> {
  const review = await authorization.createSubjectAccessReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${OPERATOR_NAMESPACE}:${account}`,
        // The groups a ServiceAccount token carries: anything bound to them counts too.
        groups: [
          'system:serviceaccounts',
          `system:serviceaccounts:${OPERATOR_NAMESPACE}`,
          'system:authenticated',
        ],
        resourceAttributes: attributes,
      },
    },
  });
  return review.status?.allowed === true;
}

/** The shipped manifests' --watch-namespace: the Proxies, their Secrets and Events. */
const W = DEFAULT_WATCH_NAMESPACE;

// [verb, group, resource (with /subresource), namespace ('' = every namespace), object name]
type Request = [string, string, string, string, string?];

function attributes([verb, group, resource, namespace, object]: Request): V1ResourceAttributes {
  const [name, subresource] = resource.split('/');
  return { verb, group, resource: name, subresource, namespace: namespace || undefined, name: object };
}

beforeAll(async () => {
  // The Redis topology's discovery account too, after the namespaces (its objects name it;
  // the operator account's objects of that file differ only by the discovery rows).
  const redis = (await distObjects('operator-redis.yaml')).filter(
    (o) =>
      RBAC_KINDS.includes(o.kind) &&
      [DISCOVERY_SERVICE_ACCOUNT_NAME, GATEWAY_SERVICE_ACCOUNT_NAME].some((a) =>
        JSON.stringify(o).includes(a),
      ),
  );
  const objects = (await distObjects('operator.yaml')).filter((o) => RBAC_KINDS.includes(o.kind));
  for (const o of [...objects, ...redis]) await api.apply(o);
  // The authorizer reads bindings from a cache: wait until it sees each of the three.
  const seen: Request[] = [
    ['watch', GROUP, PLURAL, W],
    ['update', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE],
    ['create', '', 'pods', PROXIES_NAMESPACE],
  ];
  const deadline = Date.now() + 60_000;
  const discoverySees = async () =>
    (await operatorMay(attributes(['watch', '', 'secrets', W]), DISCOVERY_SERVICE_ACCOUNT_NAME)) &&
    operatorMay(attributes(['watch', '', 'secrets', W]), GATEWAY_SERVICE_ACCOUNT_NAME);
  while (
    !(await Promise.all([...seen.map((r) => operatorMay(attributes(r))), discoverySees()])).every(Boolean)
  ) {
    if (Date.now() > deadline) throw new Error('the operator RBAC bindings never took effect');
    await new Promise((r) => setTimeout(r, 250));
  }
});

describe('the operator ServiceAccount', () => {
  it.each<[string, Request]>([
    ['list Proxies in the watched namespace (informer)', ['list', GROUP, PLURAL, W]],
    ['watch Proxies in the watched namespace (informer)', ['watch', GROUP, PLURAL, W]],
    ['patch a Proxy (finalizer, spec-hash annotation)', ['patch', GROUP, PLURAL, W]],
    ['patch the status of a Proxy', ['patch', GROUP, `${PLURAL}/status`, W]],
    ['list Secrets in the watched namespace (cloud-init, credentials informers)', ['list', '', 'secrets', W]],
    [
      'watch Secrets in the watched namespace (cloud-init, credentials informers)',
      ['watch', '', 'secrets', W],
    ],
    // A Managed proxy's generated credentials (RBAC cannot scope create by name).
    ['create Secrets in the watched namespace', ['create', '', 'secrets', W]],
    ['create Events where its Proxies are', ['create', '', 'events', W]],
    ['get its leader-election Lease', ['get', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['create its leader-election Lease', ['create', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['renew its leader-election Lease', ['update', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['create proxy Pods in the provider namespace', ['create', '', 'pods', PROXIES_NAMESPACE]],
    ['get proxy Pods in the provider namespace', ['get', '', 'pods', PROXIES_NAMESPACE]],
    ['list proxy Pods in the provider namespace (orphan sweep)', ['list', '', 'pods', PROXIES_NAMESPACE]],
    ['delete proxy Pods in the provider namespace', ['delete', '', 'pods', PROXIES_NAMESPACE]],
    ['get the kube-system Namespace (default --cluster-name)', ['get', '', 'namespaces', '', 'kube-system']],
  ])('may %s', async (_what, request) => {
    expect(await operatorMay(attributes(request))).toBe(true);
  });

  it.each<[string, Request]>([
    ['list Secrets in every namespace', ['list', '', 'secrets', '']],
    ['watch Secrets in every namespace', ['watch', '', 'secrets', '']],
    ['list Secrets in kube-system', ['list', '', 'secrets', 'kube-system']],
    [
      'list Secrets in its own namespace (Redis password, discovery tokens)',
      ['list', '', 'secrets', OPERATOR_NAMESPACE],
    ],
    ['get a Secret by name (it only lists and watches)', ['get', '', 'secrets', W, 'any']],
    ['create Secrets outside the watched namespace', ['create', '', 'secrets', 'kube-system']],
    ['create Secrets in another namespace', ['create', '', 'secrets', 'team-a']],
    ['list Proxies in every namespace', ['list', GROUP, PLURAL, '']],
    ['patch Proxies in another namespace', ['patch', GROUP, PLURAL, 'team-a']],
    ['create Events in another namespace', ['create', '', 'events', 'team-a']],
    ['create Proxies', ['create', GROUP, PLURAL, W]],
    ['delete Proxies', ['delete', GROUP, PLURAL, W]],
    ['replace Proxies (it only patches)', ['update', GROUP, PLURAL, W]],
    ['replace the status of a Proxy (it only patches)', ['update', GROUP, `${PLURAL}/status`, W]],
    ['patch Secrets', ['patch', '', 'secrets', W]],
    ['delete Secrets', ['delete', '', 'secrets', W]],
    ['patch Events', ['patch', '', 'events', W]],
    ['update a Lease in default', ['update', 'coordination.k8s.io', 'leases', 'default']],
    ['create a Lease in kube-system', ['create', 'coordination.k8s.io', 'leases', 'kube-system']],
    ['delete its leader-election Lease', ['delete', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['create Pods in default', ['create', '', 'pods', 'default']],
    ['delete Pods in kube-system', ['delete', '', 'pods', 'kube-system']],
    ['list Pods in every namespace', ['list', '', 'pods', '']],
    ['get ConfigMaps in kube-system', ['get', '', 'configmaps', 'kube-system']],
    ['create Deployments', ['create', 'apps', 'deployments', OPERATOR_NAMESPACE]],
    ['get Nodes', ['get', '', 'nodes', '']],
    ['create ClusterRoleBindings', ['create', 'rbac.authorization.k8s.io', 'clusterrolebindings', '']],
    ['create Namespaces', ['create', '', 'namespaces', '']],
    ['get any other Namespace', ['get', '', 'namespaces', '', 'default']],
    ['list Namespaces', ['list', '', 'namespaces', '']],
    [
      'create a ServiceAccount token',
      ['create', '', 'serviceaccounts/token', OPERATOR_NAMESPACE, SERVICE_ACCOUNT_NAME],
    ],
  ])('may not %s', async (_what, request) => {
    expect(await operatorMay(attributes(request))).toBe(false);
  });
});

describe.each([DISCOVERY_SERVICE_ACCOUNT_NAME, GATEWAY_SERVICE_ACCOUNT_NAME])(
  "the %s Pods' ServiceAccount (dist/operator-redis.yaml)",
  (account) => {
    const may = (request: Request) => operatorMay(attributes(request), account);

    it.each<[string, Request]>([
      ['list Proxies in the watched namespace', ['list', GROUP, PLURAL, W]],
      ['watch Proxies in the watched namespace', ['watch', GROUP, PLURAL, W]],
      // A lease carries the proxy's credentials, read from its Secret by every replica.
      ['list Secrets in the watched namespace', ['list', '', 'secrets', W]],
      ['watch Secrets in the watched namespace', ['watch', '', 'secrets', W]],
    ])('may %s', async (_what, request) => {
      expect(await may(request)).toBe(true);
    });

    it.each<[string, Request]>([
      ['create a Secret in the watched namespace', ['create', '', 'secrets', W]],
      ['create a Secret in its own namespace', ['create', '', 'secrets', OPERATOR_NAMESPACE]],
      ['get a Secret in the watched namespace', ['get', '', 'secrets', W, 'any']],
      [
        'get a Secret in its own namespace (Redis password)',
        ['get', '', 'secrets', OPERATOR_NAMESPACE, 'proxy-operator-redis'],
      ],
      ['list Secrets in its own namespace', ['list', '', 'secrets', OPERATOR_NAMESPACE]],
      ['list Secrets in kube-system', ['list', '', 'secrets', 'kube-system']],
      ['list Secrets in every namespace', ['list', '', 'secrets', '']],
      ['patch a Proxy', ['patch', GROUP, PLURAL, W]],
      ['patch the status of a Proxy', ['patch', GROUP, `${PLURAL}/status`, W]],
      ['create Events', ['create', '', 'events', W]],
      ['get the leader-election Lease', ['get', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
      ['update the leader-election Lease', ['update', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
      ['create proxy Pods', ['create', '', 'pods', PROXIES_NAMESPACE]],
      ['list proxy Pods', ['list', '', 'pods', PROXIES_NAMESPACE]],
      ['get the kube-system Namespace', ['get', '', 'namespaces', '', 'kube-system']],
      ['list Proxies in every namespace', ['list', GROUP, PLURAL, '']],
    ])('may not %s', async (_what, request) => {
      expect(await may(request)).toBe(false);
    });
  },
);

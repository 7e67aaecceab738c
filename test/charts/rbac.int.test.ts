import { AuthorizationV1Api, type V1ResourceAttributes } from '@kubernetes/client-node';
import { OPERATOR_NAMESPACE, PROXIES_NAMESPACE, SERVICE_ACCOUNT_NAME } from '../../charts/names.js';
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

/** What the API server authorizes for the operator's ServiceAccount token. */
async function operatorMay(attributes: V1ResourceAttributes): Promise<boolean> {
  const review = await authorization.createSubjectAccessReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${OPERATOR_NAMESPACE}:${SERVICE_ACCOUNT_NAME}`,
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

// [verb, group, resource (with /subresource), namespace ('' = every namespace), object name]
type Request = [string, string, string, string, string?];

function attributes([verb, group, resource, namespace, object]: Request): V1ResourceAttributes {
  const [name, subresource] = resource.split('/');
  return { verb, group, resource: name, subresource, namespace: namespace || undefined, name: object };
}

beforeAll(async () => {
  const objects = (await distObjects('operator.yaml')).filter((o) => RBAC_KINDS.includes(o.kind));
  for (const o of objects) await api.apply(o);
  // The authorizer reads bindings from a cache: wait until it sees each of the three.
  const seen: Request[] = [
    ['watch', GROUP, PLURAL, ''],
    ['update', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE],
    ['create', '', 'pods', PROXIES_NAMESPACE],
  ];
  const deadline = Date.now() + 60_000;
  while (!(await Promise.all(seen.map((r) => operatorMay(attributes(r))))).every(Boolean)) {
    if (Date.now() > deadline) throw new Error('the operator RBAC bindings never took effect');
    await new Promise((r) => setTimeout(r, 250));
  }
});

describe('the operator ServiceAccount', () => {
  it.each<[string, Request]>([
    ['list Proxies in every namespace (informer)', ['list', GROUP, PLURAL, '']],
    ['watch Proxies in every namespace (informer)', ['watch', GROUP, PLURAL, '']],
    ['patch a Proxy (finalizer, spec-hash annotation)', ['patch', GROUP, PLURAL, 'team-a']],
    ['patch the status of a Proxy', ['patch', GROUP, `${PLURAL}/status`, 'team-a']],
    ['list Secrets in every namespace (cloud-init informer)', ['list', '', 'secrets', '']],
    ['watch Secrets in every namespace (cloud-init informer)', ['watch', '', 'secrets', '']],
    ['create Events where its Proxies are', ['create', '', 'events', 'team-a']],
    ['get its leader-election Lease', ['get', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['create its leader-election Lease', ['create', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['renew its leader-election Lease', ['update', 'coordination.k8s.io', 'leases', OPERATOR_NAMESPACE]],
    ['create proxy Pods in the provider namespace', ['create', '', 'pods', PROXIES_NAMESPACE]],
    ['get proxy Pods in the provider namespace', ['get', '', 'pods', PROXIES_NAMESPACE]],
    ['list proxy Pods in the provider namespace (orphan sweep)', ['list', '', 'pods', PROXIES_NAMESPACE]],
    ['delete proxy Pods in the provider namespace', ['delete', '', 'pods', PROXIES_NAMESPACE]],
    ['get the kube-system Namespace (default --cluster-name)', ['get', '', 'namespaces', '', 'kube-system']],
    // A Managed proxy's generated credentials (RBAC cannot scope create by name).
    ['create Secrets', ['create', '', 'secrets', 'team-a']],
  ])('may %s', async (_what, request) => {
    expect(await operatorMay(attributes(request))).toBe(true);
  });

  it.each<[string, Request]>([
    ['create Proxies', ['create', GROUP, PLURAL, 'team-a']],
    ['delete Proxies', ['delete', GROUP, PLURAL, 'team-a']],
    ['replace Proxies (it only patches)', ['update', GROUP, PLURAL, 'team-a']],
    ['replace the status of a Proxy (it only patches)', ['update', GROUP, `${PLURAL}/status`, 'team-a']],
    ['patch Secrets', ['patch', '', 'secrets', 'team-a']],
    ['delete Secrets', ['delete', '', 'secrets', 'team-a']],
    ['patch Events', ['patch', '', 'events', 'team-a']],
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
  ])('may not %s', async (_what, request) => {
    expect(await operatorMay(attributes(request))).toBe(false);
  });
});

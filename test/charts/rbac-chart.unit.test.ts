import type { V1ClusterRole, V1Deployment, V1PolicyRule, V1RoleBinding } from '@kubernetes/client-node';
import {
  DEFAULT_WATCH_NAMESPACE,
  DISCOVERY_DEPLOYMENT_NAME,
  DISCOVERY_SERVICE_ACCOUNT_NAME,
  GATEWAY_NAME,
  GATEWAY_SERVICE_ACCOUNT_NAME,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
  PROXIES_NAMESPACE,
  SERVICE_ACCOUNT_NAME,
} from '../../charts/names.js';
import { COMPONENTS, OPERATOR_PERMISSIONS, type Component } from '../../charts/operator-permissions.js';
import { COMPONENTS as OPERATOR_COMPONENTS } from '../../cmd/settings.js';
import { chartObjects, type Manifest } from './manifests.js';

type Role = V1ClusterRole & { kind: string };
type Binding = V1RoleBinding & { kind: string };

const rolesOf = (objects: Manifest[]) =>
  objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole') as unknown as Role[];
const bindingsOf = (objects: Manifest[]) =>
  objects.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') as unknown as Binding[];

/** One granted verb: "verb group/resource name@namespace" ('*' = every namespace), comparable as a string. */
function grants(objects: Manifest[], account: string): string[] {
  const roles = rolesOf(objects);
  const out: string[] = [];
  for (const b of bindingsOf(objects)) {
    if (!b.subjects?.some((s) => s.kind === 'ServiceAccount' && s.name === account)) continue;
    const role = roles.find(
      (r) =>
        r.kind === b.roleRef.kind &&
        r.metadata!.name === b.roleRef.name &&
        r.metadata!.namespace === b.metadata!.namespace,
    )!;
    const where = b.kind === 'ClusterRoleBinding' ? '*' : b.metadata!.namespace!;
    for (const rule of role.rules ?? []) out.push(...expand(rule, where));
  }
  return out.sort();
}

function expand(rule: V1PolicyRule, where: string): string[] {
  return (rule.apiGroups ?? []).flatMap((g) =>
    (rule.resources ?? []).flatMap((r) =>
      rule.verbs.flatMap((v) => (rule.resourceNames ?? ['']).map((n) => `${v} ${g}/${r} ${n}@${where}`)),
    ),
  );
}

/** What the permission table says an account running `components` gets, in the same form. */
function expected(components: readonly Component[], watched: string): string[] {
  const where = {
    cluster: ['*'],
    'watched-namespace': [watched],
    'operator-namespace': [OPERATOR_NAMESPACE],
    'proxies-namespace': [PROXIES_NAMESPACE],
  } as const;
  return OPERATOR_PERMISSIONS.filter((p) => p.components.some((c) => components.includes(c)))
    .flatMap((p) =>
      where[p.scope].flatMap((w) =>
        p.verbs.map((v) => `${v} ${p.apiGroup}/${p.resource} ${p.resourceName ?? ''}@${w}`),
      ),
    )
    .sort();
}

const charts = chartObjects();
const custom = chartObjects({ watchNamespace: 'crawling' });
// [chart, account, the components its Pods run]
const ACCOUNTS: Array<[string, string, Component[]]> = [
  ['operator', SERVICE_ACCOUNT_NAME, ['controller', 'discovery', 'gateway']],
  ['operator-redis', SERVICE_ACCOUNT_NAME, ['controller']],
  ['operator-redis', DISCOVERY_SERVICE_ACCOUNT_NAME, ['discovery']],
  ['operator-redis', GATEWAY_SERVICE_ACCOUNT_NAME, ['gateway']],
];

describe('the operator RBAC manifests', () => {
  it("know the operator's components (--components), no more, no fewer", () => {
    expect([...COMPONENTS].sort()).toEqual([...OPERATOR_COMPONENTS].sort());
  });

  const everyRole = [...charts.values(), ...custom.values()].flatMap(rolesOf);

  it.each(['apiGroups', 'resources', 'verbs', 'resourceNames'] as const)(
    'grant no wildcard in %s',
    (field) => {
      for (const rule of everyRole.flatMap((r) => r.rules ?? []))
        expect(rule[field] ?? []).not.toContain('*');
    },
  );

  it('grant nothing but API resources (no nonResourceURLs)', () => {
    for (const rule of everyRole.flatMap((r) => r.rules ?? [])) expect(rule.nonResourceURLs).toBeUndefined();
  });

  it('grant no verb on Secrets in a ClusterRole (no access to every Secret of the cluster)', () => {
    const clusterSecrets = everyRole
      .filter((r) => r.kind === 'ClusterRole')
      .flatMap((r) =>
        (r.rules ?? []).filter((rule) => rule.resources?.some((res) => res.startsWith('secrets'))),
      );
    expect(clusterSecrets).toEqual([]);
  });

  it.each(ACCOUNTS)(
    '%s: %s gets exactly the rows of the permission table for %j',
    (chart, account, components) => {
      expect(grants(charts.get(chart)!, account)).toEqual(expected(components, DEFAULT_WATCH_NAMESPACE));
      expect(grants(custom.get(chart)!, account)).toEqual(expected(components, 'crawling'));
    },
  );

  it.each([DISCOVERY_SERVICE_ACCOUNT_NAME, GATEWAY_SERVICE_ACCOUNT_NAME])(
    'give the %s Pods read access to Proxies and their Secrets in the watched namespace, and nothing else (no write)',
    (account) => {
      expect(grants(charts.get('operator-redis')!, account)).toEqual(
        [
          `list crawl.example.com/proxies @${DEFAULT_WATCH_NAMESPACE}`,
          `watch crawl.example.com/proxies @${DEFAULT_WATCH_NAMESPACE}`,
          `list /secrets @${DEFAULT_WATCH_NAMESPACE}`,
          `watch /secrets @${DEFAULT_WATCH_NAMESPACE}`,
        ].sort(),
      );
    },
  );

  it.each(ACCOUNTS)(
    '%s: the Pods of %s watch the namespace their Roles are generated for',
    (chart, account) => {
      for (const [objects, ns] of [
        [charts.get(chart)!, DEFAULT_WATCH_NAMESPACE],
        [custom.get(chart)!, 'crawling'],
      ] as const) {
        const deployments = (
          objects.filter((o) => o.kind === 'Deployment') as unknown as V1Deployment[]
        ).filter((d) => d.spec!.template.spec!.serviceAccountName === account);
        expect(deployments.length).toBeGreaterThan(0);
        for (const d of deployments)
          expect(d.spec!.template.spec!.containers[0].args).toContain(`--watch-namespace=${ns}`);
      }
    },
  );

  // The credentials key (docs/security.md): the controller reads one Secret of its own namespace
  // by name and may create it; nothing else of that namespace's Secrets (the discovery tokens,
  // the Redis password), and no other account touches them.
  it.each<[string, string, string[]]>([
    ['operator', SERVICE_ACCOUNT_NAME, ['create /secrets ', 'get /secrets proxy-operator-credentials-key']],
    [
      'operator-redis',
      SERVICE_ACCOUNT_NAME,
      ['create /secrets ', 'get /secrets proxy-operator-credentials-key'],
    ],
    ['operator-redis', DISCOVERY_SERVICE_ACCOUNT_NAME, []],
    ['operator-redis', GATEWAY_SERVICE_ACCOUNT_NAME, []],
  ])('%s: %s may do only %j to Secrets of the operator namespace', (chart, account, want) => {
    const secrets = grants(charts.get(chart)!, account)
      .filter((g) => g.includes(' /secrets ') && g.endsWith(`@${OPERATOR_NAMESPACE}`))
      .map((g) => g.slice(0, -`@${OPERATOR_NAMESPACE}`.length));
    expect(secrets).toEqual(want);
  });

  it('run each Redis-store component under its own account', () => {
    const pods = Object.fromEntries(
      (charts.get('operator-redis')!.filter((o) => o.kind === 'Deployment') as unknown as V1Deployment[]).map(
        (d) => [d.metadata!.name, d.spec!.template.spec!.serviceAccountName],
      ),
    );
    expect(pods).toEqual({
      [OPERATOR_NAME]: SERVICE_ACCOUNT_NAME,
      [DISCOVERY_DEPLOYMENT_NAME]: DISCOVERY_SERVICE_ACCOUNT_NAME,
      [GATEWAY_NAME]: GATEWAY_SERVICE_ACCOUNT_NAME,
    });
  });

  // The account tests above look at the operator charts' accounts; a grant anywhere else
  // (a sample's Role, a binding to a Group) would have passed them unseen.
  it.each([
    ['default', charts],
    ['--watch-namespace=crawling', custom],
  ] as const)(
    '(%s) grant only to the accounts above: every binding, account and token-mounting Pod of every chart',
    (_case, all) => {
      const accounts = new Set(ACCOUNTS.map(([chart, account]) => `${chart}/${account}`));
      const strays: string[] = [];
      for (const [chart, objects] of all) {
        for (const b of bindingsOf(objects))
          for (const s of b.subjects ?? [])
            if (
              s.kind !== 'ServiceAccount' ||
              s.namespace !== OPERATOR_NAMESPACE ||
              !accounts.has(`${chart}/${s.name}`)
            )
              strays.push(
                `${chart}: ${b.kind} ${b.metadata!.name} binds ${s.kind} ${s.namespace ?? ''}/${s.name}`,
              );
        for (const o of objects.filter((o) => o.kind === 'ServiceAccount'))
          if (!accounts.has(`${chart}/${o.metadata.name}`))
            strays.push(`${chart}: ServiceAccount ${o.metadata.name}`);
        for (const d of objects.filter((o) => o.kind === 'Deployment') as unknown as V1Deployment[]) {
          const pod = d.spec!.template.spec!;
          if (pod.automountServiceAccountToken === false) continue;
          const account = pod.serviceAccountName ?? 'default';
          if (!accounts.has(`${chart}/${account}`))
            strays.push(`${chart}: Deployment ${d.metadata!.name} mounts the token of ${account}`);
        }
      }
      expect(strays).toEqual([]);
    },
  );

  it.each([...charts.keys()].filter((c) => c.startsWith('operator')))(
    '%s: bind every role to a ServiceAccount of the operator namespace, and only roles the chart defines',
    (chart) => {
      const objects = charts.get(chart)!;
      const roles = rolesOf(objects);
      const bindings = bindingsOf(objects);
      expect(bindings.length).toBe(roles.length);
      for (const b of bindings) {
        expect(b.subjects).toEqual([
          expect.objectContaining({
            kind: 'ServiceAccount',
            name: b.roleRef.name,
            namespace: OPERATOR_NAMESPACE,
          }),
        ]);
        const role = roles.find(
          (r) =>
            r.kind === b.roleRef.kind &&
            r.metadata!.name === b.roleRef.name &&
            r.metadata!.namespace === b.metadata!.namespace,
        );
        expect([b.kind, b.metadata!.namespace, role === undefined]).toEqual([
          b.kind,
          b.metadata!.namespace,
          false,
        ]);
      }
    },
  );
});

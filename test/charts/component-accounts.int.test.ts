import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { App } from 'cdk8s';
import {
  DISCOVERY_SERVICE_ACCOUNT_NAME,
  GATEWAY_SERVICE_ACCOUNT_NAME,
  OPERATOR_NAMESPACE,
  SERVICE_ACCOUNT_NAME,
} from '../../charts/names.js';
import { OperatorChart } from '../../charts/operator-chart.js';
import { OPERATOR_PERMISSIONS, type Component } from '../../charts/operator-permissions.js';
import { providersYaml } from '../../charts/providers-config.js';
import { CREDENTIALS_KEY_SECRET } from '../../crds/proxy-credentials.js';
import { GROUP, PLURAL, VERSION } from '../../crds/proxy-types.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { eventually } from '../../framework/testing/index.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, type OperatorProcess } from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { startApiRecorder, type ApiRecorder } from './api-recorder.js';
import type { Manifest } from './manifests.js';
import { ServerSideApply } from './server-side-apply.js';

// Issue 44 item 1 (and issue 46 item 4 for the gateway): each component of the Redis topology (dist/operator-redis.yaml) runs as a
// real operator process under its own ServiceAccount's token, with the RBAC the chart
// generates for this suite's namespaces, through a recorder of every API request. The run
// fails on any refused request, and on any verb of the permission table no request used:
// the table (charts/operator-permissions.ts) is exactly what the code calls.
const admin = testKubeConfig();
const core = admin.makeApiClient(CoreV1Api);
const watched = uniqueName('accounts');
const pods = uniqueName('accounts-pods');
const leaseName = uniqueName('accounts-leader');
const RBAC_KINDS = [
  'Namespace',
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
];
const providers = [
  { name: 'kubernetes', type: 'kubernetes', kubernetes: { namespace: pods, image: 'ubuntu/squid' } },
];

let dir: string;
let redis: RedisServer;
const recorders: Partial<Record<Component, ApiRecorder>> = {};
const processes: OperatorProcess[] = [];
const tokens: Partial<Record<Component, string>> = {};

/** The table's rows for one component, in the recorder's form. */
function tableKeys(component: Component): string[] {
  const where = {
    cluster: '*',
    'watched-namespace': watched,
    'operator-namespace': OPERATOR_NAMESPACE,
    'proxies-namespace': pods,
  } as const;
  return OPERATOR_PERMISSIONS.filter((p) => p.components.includes(component))
    .flatMap((p) => p.verbs.map((v) => `${v} ${p.apiGroup}/${p.resource}@${where[p.scope]}`))
    .sort();
}

const used = (component: Component) => [...new Set(recorders[component]!.calls.map((c) => c.key))].sort();
const refused = (component: Component) =>
  recorders[component]!.calls.filter((c) => c.status === 401 || c.status === 403);

/** A kubeconfig whose only credential is the account's token, through the component's recorder. */
async function kubeconfigFor(component: Component, token: string): Promise<string> {
  const path = join(dir, `${component}.kubeconfig`);
  const server = recorders[component]!.url;
  await writeFile(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      // client-node takes plain HTTP only with this flag set; the hop is loopback to the
      // recorder, which verifies the API server's certificate against its CA.
      `clusters: [{name: local, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: ${component}, user: {token: "${token}"}}]`,
      `contexts: [{name: local, context: {cluster: local, user: ${component}, namespace: ${watched}}}]`,
      'current-context: local',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  return path;
}

async function tokenOf(account: string): Promise<string> {
  const answer = await core.createNamespacedServiceAccountToken({
    name: account,
    namespace: OPERATOR_NAMESPACE,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = answer.status?.token;
  if (!token) throw new Error(`no token for ${account}`);
  return token;
}

/** A client authenticated as the component's account only (no recorder): for the attempts that must fail. */
function clientAs(component: Component): CoreV1Api {
  const kc = new KubeConfig();
  const cluster = admin.getCurrentCluster()!;
  kc.loadFromOptions({
    clusters: [{ name: 'local', server: cluster.server, caData: cluster.caData }],
    users: [{ name: component, token: tokens[component]! }],
    contexts: [{ name: 'local', cluster: 'local', user: component }],
    currentContext: 'local',
  });
  return kc.makeApiClient(CoreV1Api);
}

const statusOf = (p: Promise<unknown>) =>
  p.then(
    () => 200,
    (err: { code?: number }) => err.code ?? -1,
  );

beforeAll(async () => {
  await installProxyCrd(admin);
  await core.createNamespace({ body: { metadata: { name: watched } } });
  dir = await mkdtemp(join(tmpdir(), 'accounts-'));
  redis = await startRedisServer();
  const chart = new OperatorChart(new App(), 'accounts', {
    watchNamespace: watched,
    providers,
    leaseStore: { kind: 'redis', url: redis.url },
  });
  const apply = new ServerSideApply(admin, 'proxy-operator-accounts-test');
  for (const o of chart.toJson() as Manifest[]) if (RBAC_KINDS.includes(o.kind)) await apply.apply(o);
  // The controller creates the credentials key Secret at its first reconcile: start without one
  // (an earlier suite's run may have left it), so the create of the table is exercised.
  await core
    .deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: CREDENTIALS_KEY_SECRET })
    .catch((err: { code?: number }) => {
      if (err.code !== 404) throw err;
    });
  tokens.controller = await tokenOf(SERVICE_ACCOUNT_NAME);
  tokens.discovery = await tokenOf(DISCOVERY_SERVICE_ACCOUNT_NAME);
  tokens.gateway = await tokenOf(GATEWAY_SERVICE_ACCOUNT_NAME);
  // The authorizer reads bindings from a cache: wait until every account may list Secrets.
  for (const c of ['controller', 'discovery', 'gateway'] as const) {
    await eventually(
      `${c}'s RoleBinding in effect`,
      async () =>
        (await statusOf(clientAs(c).listNamespacedSecret({ namespace: watched }))) === 200 ? true : undefined,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  }
  recorders.controller = await startApiRecorder(admin);
  recorders.discovery = await startApiRecorder(admin);
  recorders.gateway = await startApiRecorder(admin);
  const providersFile = join(dir, 'providers.yaml');
  await writeFile(providersFile, providersYaml(providers));

  const common = async (component: Component) => [
    '--kubeconfig',
    await kubeconfigFor(component, tokens[component]!),
    '--providers-config',
    providersFile,
    '--watch-namespace',
    watched,
    '--metrics-address',
    `127.0.0.1:${await freePort()}`,
    '--discovery-address',
    `127.0.0.1:${await freePort()}`,
    '--lease-store',
    'redis',
    '--redis-url',
    redis.url,
    '--log-level',
    'warn',
  ];
  processes.push(
    runOperator([
      ...(await common('controller')),
      '--components',
      'controller',
      '--leader-election-namespace',
      OPERATOR_NAMESPACE,
      '--leader-election-id',
      leaseName,
      '--orphan-sweep-interval',
      '1',
      '--orphan-min-age',
      '1',
    ]),
    runOperator([...(await common('discovery')), '--components', 'discovery']),
    // The harness gives the gateway a free loopback port (GATEWAY_ADDRESS).
    runOperator([...(await common('gateway')), '--components', 'gateway']),
  );
}, 120_000);

afterAll(async () => {
  for (const p of processes) p.child.kill('SIGKILL');
  await Promise.all(processes.map((p) => p.exited));
  for (const r of Object.values(recorders)) await r.close();
  await redis?.stop();
  await rm(dir, { recursive: true, force: true });
});

const output = () => processes.map((p) => p.output()).join('\n---\n');

describe('each component under its own ServiceAccount, on a real control plane', () => {
  it('the controller reconciles a Managed kubernetes-provider Proxy, sweeps, leads, and deletes it; every verb of its table used, none refused', async () => {
    const proxies = new ProxyApi(admin, watched);
    await proxies.create('px', {
      spec: {
        mode: 'Managed',
        provider: 'kubernetes',
        // Loopback only; the Pod never runs here (no kubelet), so nothing is probed.
        healthCheck: { probeURL: 'http://127.0.0.1:9/' },
      },
    });
    // Its Squid Pod is created in the provider namespace (the chart labels it Pod Security
    // "restricted": the API server admits only a Pod that meets the profile).
    await eventually(
      'the Squid Pod created',
      async () => ((await core.listNamespacedPod({ namespace: pods })).items.length > 0 ? true : undefined),
      { timeoutMs: 90_000, intervalMs: 250 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}\nrefused: ${JSON.stringify(refused('controller'))}\n${output()}`);
    });
    await admin.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: watched,
      plural: PLURAL,
      name: 'px',
    });
    await eventually(
      'the Proxy and its Pod gone',
      async () =>
        (await proxies.get('px').then(
          () => false,
          () => true,
        )) && (await core.listNamespacedPod({ namespace: pods })).items.length === 0
          ? true
          : undefined,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // The lease is renewed every 2 s and the orphan sweep lists every second.
    await eventually(
      'every verb of the table used',
      async () => (tableKeys('controller').every((k) => used('controller').includes(k)) ? true : undefined),
      { timeoutMs: 30_000, intervalMs: 250 },
    ).catch(() => undefined);
    expect(refused('controller')).toEqual([]);
    expect(used('controller')).toEqual(tableKeys('controller'));
  }, 240_000);

  it('the discovery component serves from Proxies and their Secrets, using every verb of its table, none refused', async () => {
    await eventually(
      'every verb of the table used',
      async () => (tableKeys('discovery').every((k) => used('discovery').includes(k)) ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 250 },
    ).catch(() => undefined);
    expect(refused('discovery')).toEqual([]);
    expect(used('discovery')).toEqual(tableKeys('discovery'));
  }, 90_000);

  it('the gateway component catalogs Proxies and their Secrets, using every verb of its table (no write), none refused', async () => {
    await eventually(
      'every verb of the table used',
      async () => (tableKeys('gateway').every((k) => used('gateway').includes(k)) ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 250 },
    ).catch(() => undefined);
    expect(refused('gateway')).toEqual([]);
    expect(used('gateway')).toEqual(tableKeys('gateway'));
    expect(used('gateway').filter((k) => !/^(get|list|watch) /.test(k))).toEqual([]);
  }, 90_000);

  it.each(['discovery', 'gateway'] as const)(
    "the %s account's token can neither create nor read a Secret by name, nor list any outside the watched namespace",
    async (component) => {
      const api = clientAs(component);
      const secret = { metadata: { name: uniqueName('minted') }, stringData: { x: 'y' } };
      // A Secret it could read if it were allowed: one in each namespace.
      await core
        .createNamespacedSecret({
          namespace: watched,
          body: { metadata: { name: 'existing' }, stringData: { k: 'v' } },
        })
        .catch((err: { code?: number }) => {
          if (err.code !== 409) throw err;
        });
      expect({
        createInWatched: await statusOf(api.createNamespacedSecret({ namespace: watched, body: secret })),
        createInOperator: await statusOf(
          api.createNamespacedSecret({ namespace: OPERATOR_NAMESPACE, body: secret }),
        ),
        createToken: await statusOf(
          api.createNamespacedServiceAccountToken({
            name: SERVICE_ACCOUNT_NAME,
            namespace: OPERATOR_NAMESPACE,
            body: { spec: { audiences: [] } },
          }),
        ),
        getInWatched: await statusOf(api.readNamespacedSecret({ namespace: watched, name: 'existing' })),
        listInOperator: await statusOf(api.listNamespacedSecret({ namespace: OPERATOR_NAMESPACE })),
        listInKubeSystem: await statusOf(api.listNamespacedSecret({ namespace: 'kube-system' })),
        listEverywhere: await statusOf(api.listSecretForAllNamespaces()),
      }).toEqual({
        createInWatched: 403,
        createInOperator: 403,
        createToken: 403,
        getInWatched: 403,
        listInOperator: 403,
        listInKubeSystem: 403,
        listEverywhere: 403,
      });
    },
  );

  it("the controller account's token cannot read Secrets outside the watched namespace but its key, nor mint a token", async () => {
    const api = clientAs('controller');
    await core
      .createNamespacedSecret({
        namespace: OPERATOR_NAMESPACE,
        body: { metadata: { name: 'proxy-operator-discovery-tokens' }, stringData: { tokens: 'x' } },
      })
      .catch((err: { code?: number }) => {
        if (err.code !== 409) throw err;
      });
    expect({
      getKey: await statusOf(
        api.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: CREDENTIALS_KEY_SECRET }),
      ),
      getOtherInOperator: await statusOf(
        api.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: 'proxy-operator-discovery-tokens' }),
      ),
      listInOperator: await statusOf(api.listNamespacedSecret({ namespace: OPERATOR_NAMESPACE })),
      listInKubeSystem: await statusOf(api.listNamespacedSecret({ namespace: 'kube-system' })),
      listEverywhere: await statusOf(api.listSecretForAllNamespaces()),
      createInKubeSystem: await statusOf(
        api.createNamespacedSecret({
          namespace: 'kube-system',
          body: { metadata: { name: uniqueName('minted') } },
        }),
      ),
      createToken: await statusOf(
        api.createNamespacedServiceAccountToken({
          name: SERVICE_ACCOUNT_NAME,
          namespace: OPERATOR_NAMESPACE,
          body: { spec: { audiences: [] } },
        }),
      ),
    }).toEqual({
      getKey: 200,
      getOtherInOperator: 403,
      listInOperator: 403,
      listInKubeSystem: 403,
      listEverywhere: 403,
      createInKubeSystem: 403,
      createToken: 403,
    });
  });
});

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { LABEL_NAMESPACE, LABEL_OWNER } from '../../providers/contract.js';
import { KubernetesProvider } from '../../providers/kubernetes/kubernetes-provider.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { quiet } from './operator-fixture.js';
import { readyz, runOperatorIn, scrape, until, type OperatorProcess } from '../harness/operator-process.js';

// Issue 11 item 4: operators sharing one provider backend (the `kubernetes` provider's Pods
// in one namespace, real API objects) each sweep every second, and each deletes only its own
// orphans. Two cluster names ("prod", "staging"), and two "prod" operators that watch
// different namespaces (what the default, the kube-system UID, gives two operators of one
// cluster). Real operator processes, so the owner identity comes from the real flags.
const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const ns = { a: uniqueName('own-a'), b: uniqueName('own-b'), c: uniqueName('own-c'), d: uniqueName('own-d') };
const pods = uniqueName('own-pods');
let dir: string;
let providersFile: string;
const operators: Array<{ name: string; process: OperatorProcess; metrics: number }> = [];
// The test's own handle on the shared backend: seeds orphans as another operator would have left them.
const backend = new KubernetesProvider('kubernetes', { namespace: pods, image: 'ubuntu/squid' }, quiet, kc);

async function start(name: string, clusterName: string, watch: string): Promise<void> {
  const { process, metricsPort } = await runOperatorIn(watch, {
    leaderElection: false,
    flags: [
      '--providers-config',
      providersFile,
      '--cluster-name',
      clusterName,
      '--orphan-sweep-interval',
      '1',
      '--orphan-min-age',
      '1',
      '--log-level',
      'warn',
    ],
  });
  operators.push({ name, process, metrics: metricsPort });
}

/** An instance whose Proxy is gone, as the operator of `owner` watching `namespace` made it. */
function orphan(owner: string, namespace: string): Promise<string> {
  const uid = `gone-${Math.random().toString(36).slice(2, 10)}`;
  return backend.create({ uid, proxy: `${namespace}/gone`, namespace, owner, port: 3128, placement: {} });
}

async function podNames(): Promise<string[]> {
  return (await core.listNamespacedPod({ namespace: pods })).items.map((p) => p.metadata!.name!);
}

const name = (providerID: string) => providerID.split('/')[1];

beforeAll(async () => {
  await installProxyCrd(kc);
  for (const n of [...Object.values(ns), pods])
    await core.createNamespace({ body: { metadata: { name: n } } });
  dir = await mkdtemp(join(tmpdir(), 'owners-'));
  providersFile = join(dir, 'providers.yaml');
  await writeFile(
    providersFile,
    `providers:\n  - name: kubernetes\n    type: kubernetes\n    kubernetes: { namespace: ${pods}, image: ubuntu/squid }\n`,
  );
});

afterAll(async () => {
  for (const o of operators) o.process.child.kill('SIGKILL');
  await Promise.all(operators.map((o) => o.process.exited));
  await rm(dir, { recursive: true, force: true });
});

describe('operators sharing one provider backend', () => {
  it('each sweeps only its own orphans in the namespaces it watches; nothing else is touched', async () => {
    const orphans = {
      prodA: await orphan('prod', ns.a),
      stagingB: await orphan('staging', ns.b),
      prodC: await orphan('prod', ns.c),
      // Owned by "prod", but of a namespace no "prod" operator watches.
      prodD: await orphan('prod', ns.d),
      // Made before the owner label existed: no operator lists it, so none deletes it.
      legacy: await orphan('prod', ns.a),
    };
    await core.patchNamespacedPod(
      {
        namespace: pods,
        name: name(orphans.legacy),
        body: { metadata: { labels: { [LABEL_OWNER]: null, [LABEL_NAMESPACE]: null } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

    await start('prod-a', 'prod', ns.a);
    await start('staging-b', 'staging', ns.b);
    await start('prod-c', 'prod', ns.c);
    for (const o of operators) await until(`${o.name} ready`, () => readyz(o.metrics), 120_000);

    // A live Managed Proxy per operator: each one's Pod is an instance the others must not sweep.
    const live: Record<string, string> = {};
    for (const [key, namespace] of [
      ['a', ns.a],
      ['b', ns.b],
      ['c', ns.c],
    ] as const) {
      const api = new ProxyApi(kc, namespace);
      await api.create('p', {
        spec: { mode: 'Managed', provider: 'kubernetes', placement: { zone: 'local-a' } },
      });
      live[key] = await until(`the Proxy in ${namespace} recorded its Pod`, async () => {
        const p = await api.get('p');
        return p.status?.providerID || undefined;
      });
    }

    await until(
      'every operator swept its own orphan',
      async () => {
        const left = await podNames();
        return [orphans.prodA, orphans.stagingB, orphans.prodC].every((o) => !left.includes(name(o)))
          ? true
          : undefined;
      },
      30_000,
    );
    // Several more sweeps of every operator (1 s apart, instances older than the 1 s minimum).
    await new Promise((r) => setTimeout(r, 4_000));

    const left = await podNames();
    expect(left).toEqual(
      expect.arrayContaining([
        name(live.a),
        name(live.b),
        name(live.c),
        name(orphans.prodD),
        name(orphans.legacy),
      ]),
    );
    for (const o of operators) {
      expect([o.name, o.process.child.exitCode]).toEqual([o.name, null]);
      const deleted = /proxy_operator_orphans_deleted_total\{provider="kubernetes"\} (\d+)/.exec(
        await scrape(o.metrics),
      );
      expect([o.name, Number(deleted?.[1] ?? 0)]).toEqual([o.name, 1]);
    }
    // The unwatched namespace's orphan is visible to each "prod" sweep as spared, not forgotten.
    expect(await scrape(operators[0].metrics)).toMatch(
      /proxy_operator_orphan_sweep_spared\{provider="kubernetes",reason="UnwatchedNamespace"\} [1-9]/,
    );
  }, 240_000);
});

import { Registry } from 'prom-client';
import { BackgroundRunner } from '../../framework/core/background.js';
import type { OperatorContext } from '../../framework/index.js';
import { handlerMetadata } from '../../framework/core/registry.js';
import { stoppable } from '../../framework/utils/sleep.js';
import { OrphanSweep } from '../../handlers/orphan-sweep.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { ProxyController } from '../../handlers/proxy-controller.js';
import { PROXY_KIND } from '../../handlers/kinds.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { KubernetesProvider } from '../../providers/kubernetes/kubernetes-provider.js';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Registry as PromRegistry } from 'prom-client';
import { ProviderSet } from '../../providers/registry.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  managedSpec,
  deleteProxy,
  dropFinalizers,
  eventually,
  quiet,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';

const kc = testKubeConfig();
const namespace = uniqueName('sweep');
const MIN_AGE = 600;
let api: ProxyApi;
let target: LocalTarget;
let op: RunningOperator;
let now = Date.now();
// The instances' birth dates come from this clock, so "old" needs no waiting.
const mock = new MockProvider('mock', { provisioningSeconds: 0 }, quiet, undefined, { now: () => now });
// Real Pods on the API server (no kubelet: they stay Provisioning, which the sweep does not mind).
const pods = uniqueName('sweep-pods');
const kube = new KubernetesProvider('kubernetes', { namespace: pods, image: 'ubuntu/squid' }, quiet, kc);

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: pods } } });
  // Only the reconciler: it keeps the Proxy cache the sweep reads.
  op = await startOperator(kc, { mock, kubernetes: kube }, namespace, {}, [ProxyController]);
});

afterAll(async () => {
  await op?.stop();
  await mock.close();
  await target?.close();
});

async function duplicatesDeleted(registry: PromRegistry, provider: string): Promise<number> {
  const m = await registry.getSingleMetric('proxy_operator_duplicate_instances_deleted_total')?.get();
  return m?.values.find((v) => v.labels.provider === provider)?.value ?? 0;
}

/** A Managed Proxy on `provider`, once its instance is recorded. */
async function recorded(name: string, provider: string) {
  await api.create(name, { spec: { ...managedSpec(target), provider } });
  return eventually(`${name} recorded`, async () => {
    const p = await api.get(name);
    const cached = op.operator.cache
      .list<typeof p>(PROXY_KIND)
      .find((c) => c.metadata.uid === p.metadata.uid && c.status?.providerID);
    return p.status?.providerID && p.metadata.annotations?.['crawl.example.com/spec-hash'] && cached
      ? p
      : undefined;
  });
}

/** A second Pod of the same Proxy and revision under another name, as a missed create token leaves it. */
async function podTwin(providerID: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = providerID.slice(providerID.lastIndexOf('/') + 1);
  const pod = await core.readNamespacedPod({ namespace: pods, name });
  const twinName = `${name}-twin`;
  await core.createNamespacedPod({
    namespace: pods,
    body: { metadata: { name: twinName, labels: pod.metadata!.labels }, spec: pod.spec },
  });
  return providerID.replace(name, twinName);
}

function sweepContext(): OperatorContext {
  return {
    ...stoppable(new AbortController().signal),
    logger: quiet,
    cache: op.operator.cache,
    trigger: () => {},
    isLeader: () => true,
  };
}

function createInstance(uid: string, ageSeconds: number, revision?: string): Promise<string> {
  now = Date.now() - ageSeconds * 1000;
  return mock
    .create({
      uid,
      revision,
      proxy: 'test/p',
      namespace: 'test',
      owner: DEFAULT_HANDLER_SETTINGS.ownerID,
      port: 3128,
      placement: {},
    })
    .finally(() => (now = Date.now()));
}

describe('the orphan sweep', () => {
  it('deletes an old orphan, keeps a young one, and keeps the instance of a Proxy being deleted', async () => {
    // A Proxy held in deletion by a foreign finalizer: still live until that finalizer goes.
    const held = await api.create('held', {
      metadata: { finalizers: ['test.example.com/hold'] },
      spec: { mode: 'External', endpoint: { host: '127.0.0.4', port: 3128 } },
    });
    await deleteProxy(kc, namespace, 'held');
    await eventually('the deleting Proxy in the cache', async () =>
      op.operator.cache.get(
        {
          group: 'crawl.example.com',
          version: 'v1alpha1',
          plural: 'proxies',
          kind: 'Proxy',
          namespaced: true,
        },
        namespace,
        'held',
      )?.metadata.deletionTimestamp
        ? true
        : undefined,
    );

    const oldOrphan = await createInstance('gone-uid-1', MIN_AGE + 60);
    const youngOrphan = await createInstance('gone-uid-2', 30);
    const heldInstance = await createInstance(held.metadata.uid!, MIN_AGE + 60);

    const registry = new Registry();
    const sweep = new OrphanSweep(
      new ProviderSet(new Map([['mock', mock]])),
      { ...DEFAULT_HANDLER_SETTINGS, orphanMinAgeSeconds: MIN_AGE },
      registry,
    );
    expect(await sweep.sweepOnce(sweepContext())).toBe(1);
    const left = (await mock.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id);
    expect(left).not.toContain(oldOrphan);
    expect(left).toEqual(expect.arrayContaining([youngOrphan, heldInstance]));

    const counted = await registry.getSingleMetric('proxy_operator_orphans_deleted_total')!.get();
    expect(counted.values).toEqual([expect.objectContaining({ labels: { provider: 'mock' }, value: 1 })]);

    await dropFinalizers(kc, namespace, 'held');
  });

  it('deletes an old instance of a revision its live Proxy no longer wants, and keeps the one it is creating', async () => {
    // A create interrupted before its record, then a spec change: the Proxy now records h2.
    const live = await api.create('live', {
      metadata: { annotations: { 'crawl.example.com/spec-hash': 'h2' } },
      spec: { mode: 'External', endpoint: { host: '127.0.0.4', port: 3128 } },
    });
    await eventually('the Proxy in the cache', async () =>
      op.operator.cache.list(PROXY_KIND).some((p) => p.metadata.uid === live.metadata.uid) ? true : undefined,
    );
    const stale = await createInstance(live.metadata.uid!, MIN_AGE + 60, 'h1');
    const wanted = await createInstance(live.metadata.uid!, MIN_AGE + 60, 'h2');

    const sweep = new OrphanSweep(
      new ProviderSet(new Map([['mock', mock]])),
      { ...DEFAULT_HANDLER_SETTINGS, orphanMinAgeSeconds: MIN_AGE },
      new Registry(),
    );
    // (The first test's held instance is an orphan too by now: its Proxy went.)
    expect(await sweep.sweepOnce(sweepContext())).toBeGreaterThanOrEqual(1);
    const left = (await mock.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id);
    expect(left).not.toContain(stale);
    expect(left).toContain(wanted);
  });

  it('deletes an old second instance of the revision a Managed Proxy is on, and keeps the one its status records (mock)', async () => {
    const proxy = await recorded('twin', 'mock');
    now = Date.now() - (MIN_AGE + 60) * 1000;
    const extra = (() => {
      try {
        return mock.duplicate(proxy.status!.providerID!);
      } finally {
        now = Date.now();
      }
    })();
    const registry = new Registry();
    const sweep = new OrphanSweep(
      new ProviderSet(new Map([['mock', mock]])),
      { ...DEFAULT_HANDLER_SETTINGS, orphanMinAgeSeconds: MIN_AGE },
      registry,
    );
    await sweep.sweepOnce(sweepContext());
    const left = (await mock.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id);
    expect(left).not.toContain(extra);
    expect(left).toContain(proxy.status!.providerID);
    expect(await duplicatesDeleted(registry, 'mock')).toBe(1);
    expect((await api.get('twin')).status?.providerID).toBe(proxy.status!.providerID);
  });

  it('spares a young twin (a create in flight), then deletes it once past the grace (kubernetes provider, real Pods)', async () => {
    const proxy = await recorded('kube-twin', 'kubernetes');
    const extra = await podTwin(proxy.status!.providerID!);
    const sweepWith = (minAge: number, registry = new Registry()) =>
      new OrphanSweep(
        new ProviderSet(new Map([['kubernetes', kube]])),
        { ...DEFAULT_HANDLER_SETTINGS, orphanMinAgeSeconds: minAge },
        registry,
      );
    expect(await sweepWith(MIN_AGE).sweepOnce(sweepContext())).toBe(0);
    expect((await kube.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id)).toContain(extra);

    const registry = new Registry();
    await new Promise((r) => setTimeout(r, 2_100));
    expect(await sweepWith(1, registry).sweepOnce(sweepContext())).toBe(1);
    await eventually('the twin Pod gone', async () => {
      const ids = (await kube.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id);
      return ids.includes(extra) ? undefined : ids;
    });
    expect((await kube.listByTag(DEFAULT_HANDLER_SETTINGS.ownerID)).map((i) => i.id)).toContain(
      proxy.status!.providerID,
    );
    expect(await duplicatesDeleted(registry, 'kubernetes')).toBe(1);
  });

  it('a sweep that deletes nothing still shows proxy_operator_orphans_deleted_total at 0 (so increase() sees the first deletion)', async () => {
    const empty = new MockProvider('empty', { provisioningSeconds: 0 }, quiet);
    const registry = new Registry();
    const sweep = new OrphanSweep(
      new ProviderSet(new Map([['empty', empty]])),
      DEFAULT_HANDLER_SETTINGS,
      registry,
    );
    expect(await sweep.sweepOnce(sweepContext())).toBe(0);
    const counted = await registry.getSingleMetric('proxy_operator_orphans_deleted_total')!.get();
    expect(counted.values).toEqual([expect.objectContaining({ labels: { provider: 'empty' }, value: 0 })]);
    await empty.close();
  });

  it('stops within a second when leadership is lost while a sweep waits on an unresponsive cloud', async () => {
    const hung = new MockProvider('hung', { provisioningSeconds: 0 }, quiet);
    hung.injectFault('listByTag', 'hang');
    const sweep = new OrphanSweep(
      new ProviderSet(new Map([['hung', hung]])),
      DEFAULT_HANDLER_SETTINGS, // the default 10-minute pause between sweeps
      new Registry(),
    );
    // The runner the Operator drives: leadership won starts the sweep, leadership lost stops it.
    const runner = new BackgroundRunner(
      [{ instance: sweep, metadata: handlerMetadata(OrphanSweep) }],
      (signal) => ({ ...sweepContext(), ...stoppable(signal) }),
      quiet,
    );
    const listed = new Promise<void>((resolve) => {
      const listByTag = hung.listByTag.bind(hung);
      hung.listByTag = (owner, signal) => (resolve(), listByTag(owner, signal));
    });
    runner.startLeaderOnly(new AbortController().signal);
    await listed;
    const lost = Date.now();
    await runner.stopLeaderOnly();
    expect(Date.now() - lost).toBeLessThan(1_000);
    await hung.close();
  });
});

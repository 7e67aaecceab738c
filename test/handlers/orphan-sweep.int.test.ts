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
import { ProviderSet } from '../../providers/registry.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
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

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  // Only the reconciler: it keeps the Proxy cache the sweep reads.
  op = await startOperator(kc, { mock }, namespace, {}, [ProxyController]);
});

afterAll(async () => {
  await op?.stop();
  await mock.close();
  await target?.close();
});

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

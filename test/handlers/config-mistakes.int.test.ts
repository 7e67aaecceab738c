import { Writable } from 'node:stream';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { pino } from 'pino';
import { FINALIZER } from '../../crds/proxy-types.js';
import { PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { isNotFound } from '../../providers/errors.js';
import type { MockProvider } from '../../providers/mock/mock-provider.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  condition,
  deleteProxy,
  dropFinalizers,
  eventsOnceThere,
  eventually,
  managedSpec,
  mockProvider,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';

// Issue 11 item 5: a configuration mistake loses nothing and heals when fixed.
const kc = testKubeConfig();
const namespace = uniqueName('config');
const PERMANENT_FAILURE = 'crawl.example.com/permanent-failure-generation';
let api: ProxyApi;
let target: LocalTarget;
let mock: MockProvider;
let spare: MockProvider;
let op: RunningOperator | undefined;
const errors: Array<{ msg: string; provider?: string }> = [];

/** Captures the operator's error-level log lines. */
const logger = pino(
  { level: 'error' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) errors.push(JSON.parse(line));
      done();
    },
  }),
);

/** (Re)starts the operator with the providers config given: a config fix is a restart. */
async function restartWith(providers: Record<string, MockProvider>): Promise<void> {
  await op?.stop();
  op = await startOperator(kc, providers, namespace, {}, PROXY_HANDLERS, logger);
}

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  mock = mockProvider();
  spare = mockProvider();
});

afterAll(async () => {
  await op?.stop();
  await mock?.close();
  await spare?.close();
  await target?.close();
});

const ready = (name: string) =>
  eventually(`${name} Ready`, async () => {
    const p = await api.get(name);
    return p.status?.phase === 'Ready' ? p : undefined;
  });

const gone = (name: string) =>
  eventually(`${name} gone`, async () => {
    try {
      await api.get(name);
      return undefined;
    } catch {
      return true;
    }
  });

async function instanceExists(provider: MockProvider, id: string): Promise<boolean> {
  try {
    await provider.get(id);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

describe('a provider missing from the config', () => {
  it('on create: Pending with UnknownProvider and a Warning, retried slowly, Ready after the config is fixed and the operator restarted', async () => {
    await restartWith({ mock });
    await api.create('later', { spec: { ...managedSpec(target), provider: 'spare' } });
    const waiting = await eventually('UnknownProvider', async () => {
      const p = await api.get('later');
      return condition(p, 'Provisioned')?.reason === 'UnknownProvider' ? p : undefined;
    });
    expect(waiting.status?.phase).toBe('Pending');
    expect(waiting.metadata.annotations?.[PERMANENT_FAILURE]).toBeUndefined();
    expect(condition(waiting, 'Provisioned')?.message).toMatch(
      /fix the providers config and restart the operator/,
    );
    expect((await eventsOnceThere(kc, namespace, 'later', 'UnknownProvider')).map((e) => e.reason)).toContain(
      'UnknownProvider',
    );
    // The error line is written beside the Event, not before it: wait for it too.
    await eventually('the error log', async () =>
      errors.some((e) => e.msg === 'provider not configured') ? true : undefined,
    );
    expect(errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ msg: 'provider not configured' })]),
    );

    await restartWith({ mock, spare });
    await ready('later');
  });

  it('on delete: the finalizer stays (Warning Event, error log) until the config is fixed, then the instance is deleted', async () => {
    await restartWith({ mock, spare });
    await api.create('held', { spec: { ...managedSpec(target), provider: 'spare' } });
    const before = await ready('held');
    const instance = before.status!.providerID!;

    await restartWith({ mock });
    errors.length = 0;
    await deleteProxy(kc, namespace, 'held');
    const holding = await eventually('UnknownProvider while deleting', async () => {
      const p = await api.get('held');
      return p.status?.phase === 'Deleting' && condition(p, 'Provisioned')?.reason === 'UnknownProvider'
        ? p
        : undefined;
    });
    expect(holding.status?.phase).toBe('Deleting');
    expect(holding.metadata.finalizers).toContain(FINALIZER);
    expect(condition(holding, 'Provisioned')?.message).toContain(`cannot delete instance ${instance}`);
    const warnings = (await eventsOnceThere(kc, namespace, 'held', 'UnknownProvider')).filter(
      (e) => e.type === 'Warning',
    );
    expect(warnings.map((e) => e.reason)).toContain('UnknownProvider');
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ msg: 'cannot delete: provider not configured', provider: 'spare' }),
      ]),
    );
    // Nothing is released while the mistake lasts.
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await api.get('held')).metadata.finalizers).toContain(FINALIZER);
    expect(await instanceExists(spare, instance)).toBe(true);

    await restartWith({ mock, spare });
    await gone('held');
    expect(await instanceExists(spare, instance)).toBe(false);
  });

  it('on delete: a person can release the finalizer deliberately (the README command), leaving the instance to them', async () => {
    await restartWith({ mock, spare });
    await api.create('abandoned', { spec: { ...managedSpec(target), provider: 'spare' } });
    const instance = (await ready('abandoned')).status!.providerID!;
    await restartWith({ mock });
    await deleteProxy(kc, namespace, 'abandoned');
    await eventually('held', async () => {
      const p = await api.get('abandoned');
      return p.status?.phase === 'Deleting' && condition(p, 'Provisioned')?.reason === 'UnknownProvider'
        ? true
        : undefined;
    });
    // kubectl patch px abandoned --type=merge -p '{"metadata":{"finalizers":null}}'
    await dropFinalizers(kc, namespace, 'abandoned');
    await gone('abandoned');
    expect(await instanceExists(spare, instance)).toBe(true);
    await spare.delete(instance);
  });
});

describe('the permanent-failure annotation', () => {
  it('a hopeless create stops retrying; removing the annotation and restarting the operator retries it', async () => {
    await restartWith({ mock });
    mock.failNextCreates(1, 'permanent');
    await api.create('hopeless', { spec: managedSpec(target) });
    const failed = await eventually('Failed', async () => {
      const p = await api.get('hopeless');
      return p.status?.phase === 'Failed' && p.metadata.annotations?.[PERMANENT_FAILURE] ? p : undefined;
    });
    expect(failed.metadata.annotations?.[PERMANENT_FAILURE]).toBe(String(failed.metadata.generation));
    expect(condition(failed, 'Provisioned')?.reason).toBe('ProvisioningFailed');

    // kubectl annotate px hopeless crawl.example.com/permanent-failure-generation-
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        group: 'crawl.example.com',
        version: 'v1alpha1',
        namespace,
        plural: 'proxies',
        name: 'hopeless',
        body: { metadata: { annotations: { [PERMANENT_FAILURE]: null } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await restartWith({ mock });
    await ready('hopeless');
  });
});

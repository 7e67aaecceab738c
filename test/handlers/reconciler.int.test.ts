import { CoreV1Api, Watch } from '@kubernetes/client-node';
import { startForwardProxy } from '../../providers/mock/forward-proxy.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { FINALIZER, SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import { isNotFound } from '../../providers/errors.js';
import {
  condition,
  deleteProxy,
  eventsOnceThere,
  eventually,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// A drift check every 2 s (60 s by default, jittered) rather than one a minute: the drift test
// waits for one, and a steady proxy's check reads the instance and writes nothing. The
// replacement budget is not this suite's subject (paced-replacement's is): --max-unavailable
// 100% lets its replacement cases, which run at once, each go without waiting for a slot.
const suite = operatorSuite('reconciler', {
  settings: {
    driftCheckSeconds: 2,
    maxUnavailable: { default: { kind: 'percent', value: 100 }, byProvider: {} },
  },
});
const { api, kc, namespace } = suite;

const ready = (name: string) =>
  eventually(`${name} Ready`, async () => {
    const p = await api.get(name);
    return p.status?.phase === 'Ready' ? p : undefined;
  });

async function instanceGone(providerID: string): Promise<boolean> {
  try {
    await suite.mock.get(providerID);
    return false;
  } catch (err) {
    return isNotFound(err);
  }
}

describe('a Managed proxy', () => {
  it('is provisioned, probed through itself and becomes Ready with its conditions and Events', async () => {
    await api.create('basic', { spec: managedSpec(suite.target) });
    const p = await ready('basic');
    expect(p.metadata.finalizers).toContain(FINALIZER);
    expect(p.metadata.annotations?.[SPEC_HASH_ANNOTATION]).toMatch(/^[0-9a-f]{16}$/);
    expect(p.status).toMatchObject({ phase: 'Ready', observedGeneration: p.metadata.generation });
    expect(p.status?.providerID).toBeTruthy();
    expect(p.status?.ip).toMatch(/^127\./);
    expect(condition(p, 'Provisioned')).toMatchObject({ status: 'True', reason: 'InstanceRunning' });
    expect(condition(p, 'Healthy')).toMatchObject({ status: 'True', reason: 'ProbeSucceeded' });
    expect(p.status?.lastHealthCheckTime).toBeTruthy();
    // Fails, naming them, unless all three Events are posted.
    await eventsOnceThere(kc, namespace, 'basic', 'Creating', 'Provisioned', 'Ready');
  });
});

describe('an External proxy', () => {
  it('gets a generated credentials Secret owned by the Proxy, whose values never reach status or Events', async () => {
    await api.create('with-creds', { spec: managedSpec(suite.target) });
    const p = await ready('with-creds');
    const core = kc.makeApiClient(CoreV1Api);
    const secret = await core.readNamespacedSecret({ namespace, name: 'with-creds-proxy-credentials' });
    expect(secret.type).toBe('kubernetes.io/basic-auth');
    expect(secret.metadata?.labels?.['crawl.example.com/proxy-credentials']).toBe('true');
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Proxy', name: 'with-creds', uid: p.metadata.uid, controller: true }),
    ]);
    const password = Buffer.from(secret.data!.password, 'base64').toString('utf8');
    expect(password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const events = await eventsOnceThere(kc, namespace, 'with-creds', 'Ready');
    expect(JSON.stringify([p, events])).not.toContain(password);
  });

  it('goes Pending → Ready when its first probes pass, and Unhealthy (with an Event) when it stops answering', async () => {
    const proxy = await startForwardProxy({ host: '127.0.0.5', port: await freePort() });
    const phases: string[] = [];
    const watching = await new Watch(kc).watch(
      `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
      { fieldSelector: 'metadata.name=ext-health' },
      (_type, obj: Proxy) => {
        const phase = obj.status?.phase;
        if (phase && phases.at(-1) !== phase) phases.push(phase);
      },
      () => {},
    );
    try {
      await api.create('ext-health', {
        spec: {
          mode: 'External',
          endpoint: { host: proxy.host, port: proxy.port },
          healthCheck: managedSpec(suite.target).healthCheck,
        },
      });
      const p = await ready('ext-health');
      expect(p.status?.ip).toBe('127.0.0.5');
      expect(p.metadata.finalizers ?? []).toEqual([]);
      await eventually('both phases seen', async () => (phases.length >= 2 ? true : undefined));
      expect(phases.slice(0, 2)).toEqual(['Pending', 'Ready']);

      await proxy.close();
      await eventually('Unhealthy', async () =>
        (await api.get('ext-health')).status?.phase === 'Unhealthy' ? true : undefined,
      );
      const events = await eventsOnceThere(kc, namespace, 'ext-health', 'Unhealthy');
      expect(events).toEqual(
        expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'Unhealthy' })]),
      );
    } finally {
      watching.abort();
      await proxy.close();
    }
  });
});

describe('a steady Ready proxy', () => {
  it('is not written again over many probes (status writes happen on transitions only)', async () => {
    const p = await ready('basic');
    // Ten probes at a 2 s interval against a local target: latencies stay far below the
    // 100 ms floor of the latency-change rule, so nothing is status-affecting.
    await new Promise((r) => setTimeout(r, 20_000));
    expect((await api.get('basic')).metadata.resourceVersion).toBe(p.metadata.resourceVersion);
  });

  it('is counted in the proxy_operator_proxies gauge by phase', async () => {
    const metric = await suite.op.registry.getSingleMetric('proxy_operator_proxies')!.get();
    const ready = metric.values.find((v) => v.labels.phase === 'Ready');
    expect(ready?.value).toBeGreaterThanOrEqual(1);
  });
});

// Each case has a proxy of its own: they run at once (a replacement takes ~11 s here).
describe('replacement: proxies are immutable cattle', () => {
  it.concurrent.each([
    ['placement', { placement: { zone: 'local-b', machineType: 'small', image: 'squid-1' } }],
    ['cloud-init', { cloudInit: { inline: '#cloud-config\n# v2\n' } }],
    ['port', { port: 3129 }],
  ])('changing %s replaces the instance (new providerID, old one gone)', async (what, change) => {
    const name = `replace-${what}`;
    await api.create(name, { spec: managedSpec(suite.target) });
    const before = await ready(name);
    await api.patchSpec(name, change);
    const after = await eventually('a new instance', async () => {
      const p = await api.get(name);
      return p.status?.phase === 'Ready' && p.status.providerID !== before.status?.providerID ? p : undefined;
    });
    expect(await instanceGone(before.status!.providerID!)).toBe(true);
    expect(after.metadata.annotations?.[SPEC_HASH_ANNOTATION]).not.toBe(
      before.metadata.annotations?.[SPEC_HASH_ANNOTATION],
    );
    const events = await eventsOnceThere(kc, namespace, name, 'Replacing');
    expect(events.find((e) => e.reason === 'Replacing')?.message).toMatch(/IP WILL CHANGE/);
  });

  it.concurrent.each([
    ['attributes', { attributes: { geo: 'elsewhere' } }],
    ['maxLeases', { maxLeases: 9 }],
  ])('changing %s keeps the instance', async (what, change) => {
    const name = `keep-${what.toLowerCase()}`;
    await api.create(name, { spec: managedSpec(suite.target) });
    const before = await ready(name);
    const patched = await api.patchSpec(name, change);
    await eventually('the change handled', async () => {
      const p = await api.get(name);
      return p.status?.observedGeneration === patched.metadata.generation ? p : undefined;
    });
    const after = await api.get(name);
    expect(after.status?.providerID).toBe(before.status?.providerID);
    expect(await instanceGone(before.status!.providerID!)).toBe(false);
  });

  it.concurrent(
    'rotating the content of a labelled cloud-init Secret replaces every proxy using it',
    async () => {
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: 'squid-init', labels: { 'crawl.example.com/cloud-init': 'true' } },
          stringData: { 'user-data': '#cloud-config\n# v1\n' },
        },
      });
      await api.create('from-secret', {
        spec: managedSpec(suite.target, {
          cloudInit: { secretRef: { name: 'squid-init', key: 'user-data' } },
        }),
      });
      const before = await ready('from-secret');
      await core.replaceNamespacedSecret({
        namespace,
        name: 'squid-init',
        body: {
          metadata: { name: 'squid-init', labels: { 'crawl.example.com/cloud-init': 'true' } },
          stringData: { 'user-data': '#cloud-config\n# v2\n' },
        },
      });
      await eventually('a replacement after the Secret rotated', async () => {
        const p = await api.get('from-secret');
        return p.status?.phase === 'Ready' && p.status.providerID !== before.status?.providerID
          ? p
          : undefined;
      });
      expect(await instanceGone(before.status!.providerID!)).toBe(true);
    },
  );

  it.concurrent('an unlabelled Secret is invisible and reported as CloudInitError', async () => {
    await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'unlabelled' }, stringData: { 'user-data': '#cloud-config\n' } },
    });
    await api.create('bad-secret', {
      spec: managedSpec(suite.target, { cloudInit: { secretRef: { name: 'unlabelled', key: 'user-data' } } }),
    });
    const p = await eventually('CloudInitError', async () => {
      const x = await api.get('bad-secret');
      return condition(x, 'Provisioned')?.reason === 'CloudInitError' ? x : undefined;
    });
    expect(p.status?.phase).toBe('Pending');
    expect(condition(p, 'Provisioned')?.message).toMatch(/not labelled crawl\.example\.com\/cloud-init/);
    expect(p.status?.providerID).toBeUndefined();
  });
});

describe('deletion', () => {
  it('a Managed proxy runs its finalizer, which deletes the instance', async () => {
    await api.create('doomed', { spec: managedSpec(suite.target) });
    const p = await ready('doomed');
    await deleteProxy(kc, namespace, 'doomed');
    await eventually('the Proxy gone', async () => {
      try {
        await api.get('doomed');
        return undefined;
      } catch {
        return true;
      }
    });
    expect(await instanceGone(p.status!.providerID!)).toBe(true);
  });

  it('an External proxy gets no finalizer and is deleted at once', async () => {
    await api.create('ext', {
      spec: {
        mode: 'External',
        endpoint: { host: '127.0.0.3', port: 3128 },
        healthCheck: managedSpec(suite.target).healthCheck,
      },
    });
    const p = await eventually('handled', async () => {
      const x = await api.get('ext');
      return x.status?.phase ? x : undefined;
    });
    expect(p.metadata.finalizers ?? []).toEqual([]);
    await deleteProxy(kc, namespace, 'ext');
    await expect(api.get('ext')).rejects.toThrow();
  });
});

describe('provider errors', () => {
  it('QuotaExceeded sets the condition and retries slowly (300 s)', async () => {
    suite.mock.failNextCreates(1, 'quota');
    await api.create('quota', { spec: managedSpec(suite.target) });
    const p = await eventually('QuotaExceeded', async () => {
      const x = await api.get('quota');
      return condition(x, 'Provisioned')?.reason === 'QuotaExceeded' ? x : undefined;
    });
    expect(condition(p, 'Provisioned')?.message).toMatch(/retrying in 300 s/);
    expect(p.status?.providerID).toBeUndefined();
  });

  it('a Permanent error fails the proxy and stops retrying until the spec changes', async () => {
    suite.mock.failNextCreates(1, 'permanent');
    await api.create('perm', { spec: managedSpec(suite.target) });
    const p = await eventually('Failed', async () => {
      const x = await api.get('perm');
      return x.status?.phase === 'Failed' ? x : undefined;
    });
    expect(condition(p, 'Provisioned')).toMatchObject({ status: 'False', reason: 'ProvisioningFailed' });
    const events = await eventsOnceThere(kc, namespace, 'perm', 'ProvisioningFailed');
    expect(events.some((e) => e.type === 'Warning' && e.reason === 'ProvisioningFailed')).toBe(true);
    // A spec change is a new generation: it is retried and now succeeds.
    await api.patchSpec('perm', { placement: { zone: 'local-c', machineType: 'small', image: 'squid-1' } });
    await ready('perm');
  });

  it('transient failures of the next creates back off and recover', async () => {
    suite.mock.failNextCreates(2, 'transient');
    await api.create('flaky', { spec: managedSpec(suite.target) });
    const p = await ready('flaky');
    expect(p.status?.providerID).toBeTruthy();
  });

  it('an unknown provider is a configuration mistake: Pending with UnknownProvider, a Warning, no permanent failure', async () => {
    await api.create('nowhere', { spec: { ...managedSpec(suite.target), provider: 'gcp-mars' } });
    const p = await eventually('UnknownProvider', async () => {
      const x = await api.get('nowhere');
      return condition(x, 'Provisioned')?.reason === 'UnknownProvider' ? x : undefined;
    });
    expect(p.status?.phase).toBe('Pending');
    expect(condition(p, 'Provisioned')?.message).toMatch(
      /provider "gcp-mars" is not configured \(configured: mock\)/,
    );
    expect(p.metadata.annotations?.['crawl.example.com/permanent-failure-generation']).toBeUndefined();
    const events = await eventsOnceThere(kc, namespace, 'nowhere', 'UnknownProvider');
    expect(events.filter((e) => e.type === 'Warning' && e.reason === 'UnknownProvider')).toHaveLength(1);
  });
});

describe('drift', () => {
  it('an instance deleted behind the operator is noticed and re-created', async () => {
    await api.create('drift', { spec: managedSpec(suite.target) });
    const before = await ready('drift');
    await suite.mock.delete(before.status!.providerID!);
    // The same spec gives the same instance name, so "re-created" means the provider has it again.
    await eventually('a re-created instance', async () =>
      (await instanceGone(before.status!.providerID!)) ? undefined : true,
    );
    const events = await eventsOnceThere(kc, namespace, 'drift', 'InstanceGone');
    expect(events.find((e) => e.reason === 'InstanceGone')?.message).toMatch(/IP will change/);
    await ready('drift');
  });
});

import type { Registry } from 'prom-client';
import type { MockProvider } from '../../providers/mock/mock-provider.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  condition,
  eventsFor,
  eventually,
  fastHealthCheck,
  managedSpec,
  mockProvider,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';

// Issue 24 item 3 on a real API server and the mock provider: bans reported through the
// discovery API on N targets drain and replace a Managed proxy (a new IP, the same name) and
// put RotationDue and a Warning Event on an External one.

const DRAIN_SECONDS = 2;
// Short cooldowns: a ban counts once it ends past --cooldown + 10 % after the instance came up
// (banRotation's floor: a replacement that keeps its egress keeps its cooldowns).
const COOLDOWN_SECONDS = 10;
const kc = testKubeConfig();
const namespace = uniqueName('bans');
let api: ProxyApi;
let target: LocalTarget;
let mock: MockProvider;
let op: RunningOperator;
let discovery: string;
let external: ForwardProxy;

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  mock = mockProvider();
  external = await startForwardProxy({ host: '127.0.0.1', port: await freePort() });
  const port = await freePort();
  discovery = `http://127.0.0.1:${port}`;
  op = await startOperator(kc, { mock }, namespace, {
    replaceUnhealthyAfterSeconds: 0,
    rotationDrainSeconds: DRAIN_SECONDS,
    driftCheckSeconds: 1,
    discovery: {
      ...DEFAULT_HANDLER_SETTINGS.discovery,
      host: '127.0.0.1',
      port,
      cooldownSeconds: COOLDOWN_SECONDS,
    },
  });
});

afterAll(async () => {
  await op?.stop();
  await mock?.close();
  await external?.close();
  await target?.close();
});

async function rotations(registry: Registry): Promise<number> {
  const m = await registry.getSingleMetric('proxy_operator_replacements_total')?.get();
  return m?.values.find((v) => v.labels.cause === 'Rotation')?.value ?? 0;
}

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${discovery}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

/** Leases a proxy of `pool` for each target and reports it banned there. */
async function ban(pool: string, targets: string[]): Promise<void> {
  // Past the first 10 % of --cooldown of the instance's life (see banRotation).
  await new Promise((r) => setTimeout(r, COOLDOWN_SECONDS * 100 + 200));
  for (const t of targets) {
    const lease = await eventually(`a lease of ${pool} for ${t}`, async () => {
      const r = await call('POST', '/v1/leases', { selector: { pool }, target: t, ttlSeconds: 60 });
      return r.status === 201 ? (r.body as { leaseID: string }) : undefined;
    });
    expect((await call('POST', `/v1/leases/${lease.leaseID}/report`, { result: 'banned' })).status).toBe(200);
  }
}

describe('rotation on bans (item 3)', () => {
  it('a Managed proxy banned on N targets at once is drained and replaced: a new IP, the same name, Events and the metric', async () => {
    await api.create('banned', {
      spec: managedSpec(target, { attributes: { pool: 'managed' }, rotation: { whenCoolingDownOn: 2 } }),
    });
    const first = await eventually('Ready', async () => {
      const p = await api.get('banned');
      return p.status?.phase === 'Ready' && condition(p, 'Healthy')?.status === 'True' ? p : undefined;
    });
    // One banned target is below the threshold: nothing happens.
    await ban('managed', ['a.example']);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(condition(await api.get('banned'), 'Provisioned')?.reason).toBe('InstanceRunning');
    expect(await rotations(op.registry)).toBe(0);

    await ban('managed', ['b.example']);
    const draining = await eventually('draining', async () => {
      const p = await api.get('banned');
      return condition(p, 'Provisioned')?.reason === 'Draining' ? p : undefined;
    });
    expect(condition(draining, 'Provisioned')?.message).toMatch(
      /^rotation due \(spec\.rotation\.whenCoolingDownOn 2\): cooling down on 2 targets at once \(a\.example, b\.example\)/,
    );
    expect(draining.status?.replacement).toMatchObject({ cause: 'Rotation' });
    const replaced = await eventually(
      'Ready on a new instance',
      async () => {
        const p = await api.get('banned');
        return p.status?.phase === 'Ready' &&
          condition(p, 'Provisioned')?.reason === 'InstanceRunning' &&
          p.status.ip !== first.status?.ip
          ? p
          : undefined;
      },
      30_000,
    );
    expect(replaced.status?.replacement).toBeUndefined();
    expect(await rotations(op.registry)).toBe(1);
    expect(await eventsFor(kc, namespace, 'banned')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'Normal',
          reason: 'Rotating',
          message: expect.stringMatching(/a\.example, b\.example/),
        }),
        expect.objectContaining({ type: 'Normal', reason: 'Replacing' }),
      ]),
    );
    // A new IP: the book forgot what the old one earned, streaks included (docs/decisions/0212):
    // the fresh instance is leased for the very targets it was rotated for, and a ban there
    // starts over at --cooldown (the old IP's streak would have doubled it).
    const fresh = await call('POST', '/v1/leases', {
      selector: { pool: 'managed' },
      target: 'a.example',
      ttlSeconds: 5,
    });
    expect(fresh.status).toBe(201);
    const at = Date.now();
    const report = await call('POST', `/v1/leases/${String(fresh.body.leaseID)}/report`, {
      result: 'banned',
    });
    const rest = Date.parse(String(report.body.cooldownUntil)) - at;
    expect(rest).toBeLessThan(COOLDOWN_SECONDS * 1000 * 1.1 + 500);
    await new Promise((r) => setTimeout(r, 3_000));
    const after = await api.get('banned');
    expect(condition(after, 'Provisioned')?.reason).toBe('InstanceRunning');
    expect(after.status?.providerID).toBe(replaced.status?.providerID);
    expect(await rotations(op.registry)).toBe(1);
  }, 90_000);

  it('an External proxy banned on N targets gets Provisioned reason RotationDue and a Warning Event, and is never touched', async () => {
    await api.create('owned-elsewhere', {
      spec: {
        mode: 'External',
        endpoint: { host: external.host, port: external.port },
        attributes: { pool: 'external' },
        healthCheck: fastHealthCheck(target),
        rotation: { whenCoolingDownOn: 2 },
      },
    });
    await eventually('Ready', async () =>
      (await api.get('owned-elsewhere')).status?.phase === 'Ready' ? true : undefined,
    );
    await ban('external', ['a.example', 'b.example']);
    const due = await eventually('RotationDue', async () => {
      const p = await api.get('owned-elsewhere');
      return condition(p, 'Provisioned')?.reason === 'RotationDue' ? p : undefined;
    });
    expect(condition(due, 'Provisioned')?.message).toMatch(/its owner must give it a new IP/);
    expect(due.status?.phase).toBe('Ready');
    await eventually('the Warning Event', async () =>
      (await eventsFor(kc, namespace, 'owned-elsewhere')).some(
        (e) =>
          e.type === 'Warning' &&
          e.reason === 'RotationDue' &&
          /a\.example, b\.example/.test(e.message ?? ''),
      )
        ? true
        : undefined,
    );
  }, 60_000);
});

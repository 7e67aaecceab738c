import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { freePort } from '../../framework/testing/control-plane.js';
import {
  condition,
  eventsFor,
  eventsOnceThere,
  eventually,
  fastHealthCheck,
  managedSpec,
  operatorSuite,
  readyProxy,
  replacementsCounted,
} from './operator-fixture.js';

// Issue 24 item 3 on a real API server and the mock provider: bans reported through the
// discovery API on N targets drain and replace a Managed proxy (a new IP, the same name) and
// put RotationDue and a Warning Event on an External one.

const DRAIN_SECONDS = 2;
// Short cooldowns: a ban counts once it ends past --cooldown + 10 % after the instance came up
// (banRotation's floor: a replacement that keeps its egress keeps its cooldowns).
const COOLDOWN_SECONDS = 10;
const suite = operatorSuite('bans', {
  settings: {
    replaceUnhealthyAfterSeconds: 0,
    rotationDrainSeconds: DRAIN_SECONDS,
    driftCheckSeconds: 1,
    book: { cooldownSeconds: COOLDOWN_SECONDS },
  },
});
const { api, call, kc, namespace } = suite;
let external: ForwardProxy;

beforeAll(async () => {
  external = await startForwardProxy({ host: '127.0.0.1', port: await freePort() });
});

afterAll(async () => {
  await external?.close();
});

const rotations = () => replacementsCounted(suite.op.registry, 'Rotation');

/** Leases a proxy of `pool` for each target and reports it banned there. */
async function ban(pool: string, targets: string[]): Promise<void> {
  // Past the first 20 % of --cooldown of the instance's life (see banRotation): a ban's cooldown
  // may be 10 % short (jitter), so one reported earlier may end before the floor and not count.
  await new Promise((r) => setTimeout(r, COOLDOWN_SECONDS * 200 + 300));
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
      spec: managedSpec(suite.target, {
        attributes: { pool: 'managed' },
        rotation: { whenCoolingDownOn: 2 },
      }),
    });
    const first = await eventually('Ready', () => readyProxy(api, 'banned'));
    // One banned target is below the threshold: nothing happens.
    await ban('managed', ['a.example']);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(condition(await api.get('banned'), 'Provisioned')?.reason).toBe('InstanceRunning');
    expect(await rotations()).toBe(0);

    await ban('managed', ['b.example']);
    // An assertion, not a predicate: a timeout then shows the condition and status it last saw.
    const draining = await eventually('draining', async () => {
      const p = await api.get('banned');
      expect({ provisioned: condition(p, 'Provisioned'), status: p.status }).toMatchObject({
        provisioned: { reason: 'Draining' },
      });
      return p;
    });
    expect(condition(draining, 'Provisioned')?.message).toMatch(
      /^rotation due \(spec\.rotation\.whenCoolingDownOn 2\): cooling down on 2 targets at once/,
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
    expect(await rotations()).toBe(1);
    expect(await eventsOnceThere(kc, namespace, 'banned', 'Rotating', 'Replacing')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'Normal',
          reason: 'Rotating',
          // Targets are the teams' private business (issue 48): counted, never named.
          message: expect.stringMatching(/^rotation due .*: cooling down on 2 targets at once: draining/),
        }),
        expect.objectContaining({ type: 'Normal', reason: 'Replacing' }),
      ]),
    );
    // A new IP: the book forgot what the old one earned, streaks included (docs/decisions/0020-reports-a-ban-rests-a-rate-limit-paces-a-dead-proxy-leaves.md):
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
    expect(await rotations()).toBe(1);
  }, 90_000);

  it('an External proxy banned on N targets gets Provisioned reason RotationDue and a Warning Event, and is never touched', async () => {
    await api.create('owned-elsewhere', {
      spec: {
        mode: 'External',
        endpoint: { host: external.host, port: external.port },
        attributes: { pool: 'external' },
        healthCheck: fastHealthCheck(suite.target),
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
          /cooling down on 2 targets at once/.test(e.message ?? '') &&
          !(e.message ?? '').includes('.example'),
      )
        ? true
        : undefined,
    );
  }, 60_000);
});

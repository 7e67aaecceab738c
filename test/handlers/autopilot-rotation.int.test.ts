import {
  condition,
  eventsOnceThere,
  eventually,
  managedSpec,
  operatorSuite,
  readyProxy,
  replacementsCounted,
} from './operator-fixture.js';

// Issue 24 item 2 on a real API server and the mock provider: an old instance is drained (no
// new leases, the discovery API says draining), then replaced, with an Event and the metric.
// The autopilot's clock is moved forward so the proxy is old without waiting a max age.

const MAX_AGE = 3600;
const DRAIN_SECONDS = 3;
let offsetMillis = 0;
const suite = operatorSuite('rotation', {
  settings: {
    replaceUnhealthyAfterSeconds: 0,
    rotationDrainSeconds: DRAIN_SECONDS,
    driftCheckSeconds: 1,
    autopilotClock: () => new Date(Date.now() + offsetMillis),
  },
});
const { api, call, kc, namespace } = suite;

describe('rotation on a schedule, drained (item 2)', () => {
  it('an old proxy drains (no new lease, a live one renews), then gets a new instance; the metric and Events say why', async () => {
    await api.create('old', { spec: managedSpec(suite.target, { rotation: { maxAgeSeconds: MAX_AGE } }) });
    const first = await eventually('Ready', () => readyProxy(api, 'old'));
    const firstUp = condition(first, 'Provisioned')!.lastTransitionTime;
    const held = await eventually('a lease before the drain', async () => {
      const r = await call('POST', '/v1/leases', { ttlSeconds: 600 });
      return r.status === 201 ? (r.body as { leaseID: string }) : undefined;
    });
    expect(await replacementsCounted(suite.op.registry, 'Rotation')).toBe(0);

    // The instance is now older than its max age; a reconcile (the drift check) sees it.
    offsetMillis = (MAX_AGE + 60) * 1000;
    const draining = await eventually('draining', async () => {
      const p = await api.get('old');
      return condition(p, 'Provisioned')?.reason === 'Draining' ? p : undefined;
    });
    expect(draining.status).toMatchObject({ phase: 'Ready', replacement: { cause: 'Rotation' } });
    const explained = await eventually('the API says draining', async () => {
      const r = await call('GET', `/v1/proxies/${namespace}/old`);
      return r.body.leasable === false ? r.body : undefined;
    });
    expect(explained.reasons).toEqual([expect.objectContaining({ code: 'draining' })]);
    expect((await call('POST', '/v1/leases', {})).body).toMatchObject({ error: 'no_match' });
    expect((await call('POST', `/v1/leases/${held.leaseID}/renew`, {})).status).toBe(200);

    await eventually(
      'the drained instance deleted',
      async () => ((await api.get('old')).status?.phase === 'Provisioning' ? true : undefined),
      30_000,
    );
    // The new instance is young on the real clock.
    offsetMillis = 0;
    const replaced = await eventually(
      'Ready on a new instance',
      async () => {
        const p = await api.get('old');
        const up = condition(p, 'Provisioned');
        return p.status?.phase === 'Ready' &&
          up?.reason === 'InstanceRunning' &&
          up.lastTransitionTime !== firstUp
          ? p
          : undefined;
      },
      30_000,
    );
    expect(replaced.status?.replacement).toBeUndefined();
    expect(await replacementsCounted(suite.op.registry, 'Rotation')).toBe(1);
    const events = await eventsOnceThere(kc, namespace, 'old', 'Rotating');
    expect(events).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'Normal', reason: 'Rotating' }),
        expect.objectContaining({ type: 'Normal', reason: 'Replacing' }),
      ]),
    );
    await eventually('leasable again', async () =>
      (await call('POST', '/v1/leases', {})).status === 201 ? true : undefined,
    );
  }, 120_000);
});

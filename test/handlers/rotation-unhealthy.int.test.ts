import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Proxy } from '../../crds/proxy-types.js';
import { DeleteRecordingProvider } from './delegating-provider.js';
import { condition, eventsOnceThere, eventually, managedSpec, operatorSuite } from './operator-fixture.js';

// Issue 24: a rotated proxy whose new instance is not Ready at its first probe keeps that
// instance. The Rotation record stays until the new instance is Ready (it holds the slot);
// the operator used to read it as a drain and delete the new instance at once, again and again.
// Here the probe target fails from the drain on, so the new instance comes up Unhealthy: it is
// kept until the dead-proxy grace replaces it (once), and Ready when the target heals.
//
// The autopilot's clock runs OFFSET ahead, so the proxy is past its max age at once; the
// Unhealthy grace is set OFFSET + GRACE, so it ends GRACE real seconds after Unhealthy.

const MAX_AGE = 3600;
const OFFSET = MAX_AGE + 60;
const GRACE = 12;
let offsetMillis = OFFSET * 1000;
let probes: Server;
let probeURL = '';
let failing = false;
const deletes: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts the deletes the operator asks of the mock. */
const suite = operatorSuite('rotation-unhealthy', {
  providers: (mock) => ({ mock: new DeleteRecordingProvider(mock, deletes) }),
  settings: {
    replaceUnhealthyAfterSeconds: OFFSET + GRACE,
    rotationDrainSeconds: 2,
    driftCheckSeconds: 1,
    autopilotClock: () => new Date(Date.now() + offsetMillis),
  },
});
const { api, kc, namespace } = suite;

beforeAll(async () => {
  // A probe target the test can break for the proxies: 503 instead of 204 while `failing`, to
  // requests through a mock proxy (each connects out from its own loopback address). The
  // operator's direct check (from 127.0.0.1) still gets 204, so the cause is the proxy's and
  // the repair is not held (repair-hold.ts).
  probes = createServer((req, res) =>
    res.writeHead(failing && req.socket.remoteAddress !== '127.0.0.1' ? 503 : 204).end(),
  );
  await new Promise<void>((resolve) => probes.listen(0, '127.0.0.1', resolve));
  probeURL = `http://127.0.0.1:${(probes.address() as AddressInfo).port}/generate_204`;
});

afterAll(async () => {
  probes?.closeAllConnections();
  await new Promise((resolve) => probes?.close(resolve));
});

const get = () => api.get('rotated');

describe('a rotated proxy whose new instance starts Unhealthy (issue 24)', () => {
  it('keeps the new instance until the Unhealthy grace replaces it once, then is Ready when the target heals', async () => {
    const base = managedSpec(suite.target, { rotation: { maxAgeSeconds: MAX_AGE } });
    await api.create('rotated', {
      spec: { ...base, healthCheck: { ...base.healthCheck, probeURL } },
    });
    await eventually('draining', async () =>
      condition(await get(), 'Provisioned')?.reason === 'Draining' ? true : undefined,
    );
    // From now on every probe fails: the new instance is Unhealthy at its first probe.
    failing = true;
    const unhealthy = await eventually(
      'the new instance Unhealthy',
      async () => {
        const p = await get();
        return deletes.length > 0 &&
          p.status?.phase === 'Unhealthy' &&
          condition(p, 'Provisioned')?.reason === 'InstanceRunning'
          ? p
          : undefined;
      },
      30_000,
    );
    expect(unhealthy.status?.replacement?.cause).toBe('Rotation');
    expect(deletes).toEqual([unhealthy.status?.providerID]); // the drained instance only
    const since = Date.parse(condition(unhealthy, 'Healthy')!.lastTransitionTime);

    // Many reconciles (the drift check runs every second): the new instance stays. Before the
    // fix the first of them deleted it as "drained", and every instance after it.
    const watched: Proxy[] = [];
    while (Date.now() < since + (GRACE - 3) * 1000) {
      watched.push(await get());
      await sleep(500);
    }
    expect(deletes).toHaveLength(1);
    expect(watched.at(-1)?.status?.replacement?.oldInstanceGoneAt).toBeDefined();
    for (const p of watched)
      expect(p.status).toMatchObject({
        phase: 'Unhealthy',
        providerID: unhealthy.status?.providerID,
        ip: unhealthy.status?.ip,
        replacement: { cause: 'Rotation' },
      });

    // The dead-proxy grace replaces it, as any Unhealthy Managed proxy, once (one repair per Ready).
    const repaired = await eventually(
      'replaced as Unhealthy after the grace',
      async () => {
        const p = await get();
        return p.status?.replacement?.cause === 'Unhealthy' ? p : undefined;
      },
      20_000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(since + GRACE * 1000);
    // Not the rotation's: the repair's own old instance went after the repair began.
    const gone = repaired.status?.replacement?.oldInstanceGoneAt;
    if (gone)
      expect(Date.parse(gone)).toBeGreaterThanOrEqual(Date.parse(repaired.status!.replacement!.startedAt));
    await eventually('the repair deleted the instance', async () =>
      deletes.length === 2 ? true : undefined,
    );
    const events = await eventsOnceThere(kc, namespace, 'rotated', 'Rotating', 'ReplacingUnhealthy');
    expect(events).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ reason: 'Rotating' }),
        expect.objectContaining({ reason: 'ReplacingUnhealthy' }),
      ]),
    );

    // The autopilot's clock back to real time (no rotation due, no grace ending), the target healed.
    offsetMillis = 0;
    failing = false;
    const ready = await eventually(
      'Ready on its new instance',
      async () => {
        const p = await get();
        return p.status?.phase === 'Ready' && p.status.replacement === undefined ? p : undefined;
      },
      30_000,
    );
    expect(condition(ready, 'Provisioned')?.reason).toBe('InstanceRunning');
    expect(deletes).toHaveLength(2);
  }, 90_000);
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Proxy } from '../../crds/proxy-types.js';
import { DEAD_IP, Killable } from './killable-provider.js';
import {
  condition,
  eventsOnceThere,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
} from './operator-fixture.js';

// Issue 44 item 2 on a real API server, with the mock provider's real forward proxies on
// loopback: a shared cause never replaces the fleet. 20 Managed proxies; the probe target goes
// down for longer than the Unhealthy grace (0 instances replaced: the direct check holds every
// repair); then the target fails only for requests through the proxies (0 replaced: more than
// 20% of the provider's proxies are Unhealthy at once); then one proxy really dies, and only it
// is replaced.

const COUNT = 20;
const GRACE = 5;
let probes: Server;
let probeURL = '';
/** The target is down for everyone (its sockets are dropped). */
let down = false;
/** The target refuses requests through a proxy (each connects from its own loopback address). */
let downThroughProxies = false;
const deletes: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let provider: Killable;
const suite = operatorSuite('repair-hold', {
  providers: (mock) => ({ mock: (provider = new Killable(mock, deletes)) }),
  settings: {
    replaceUnhealthyAfterSeconds: GRACE,
    repairHoldUnhealthyPercent: 20,
    maxUnavailable: { default: { kind: 'percent', value: 25 }, byProvider: {} },
    driftCheckSeconds: 1,
  },
});
const { api, kc, namespace } = suite;
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

beforeAll(async () => {
  probes = createServer((req, res) => {
    if (down || (downThroughProxies && req.socket.remoteAddress !== '127.0.0.1')) {
      req.socket.destroy();
      return;
    }
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => probes.listen(0, '127.0.0.1', resolve));
  probeURL = `http://127.0.0.1:${(probes.address() as AddressInfo).port}/generate_204`;
});

afterAll(async () => {
  probes?.closeAllConnections();
  await new Promise((resolve) => probes?.close(resolve));
});

const all = () => Promise.all(names.map((n) => api.get(n)));
const everyOne = (what: string, test: (p: Proxy) => boolean, timeoutMs?: number) =>
  everyProxy(api, names, what, test, timeoutMs);

async function heldCount(reason: string): Promise<number> {
  const m = await suite.op.registry.getSingleMetric('proxy_operator_repairs_held')?.get();
  return m?.values.filter((v) => v.labels.reason === reason).reduce((a, v) => a + v.value, 0) ?? 0;
}

/** Every proxy held for `reason`, past the grace, and still on its first instance `after` ms later. */
async function heldThrough(reason: string, instances: Map<string, string>): Promise<void> {
  await everyOne(`all ${COUNT} Unhealthy`, (p) => p.status?.phase === 'Unhealthy', 30_000);
  const held = await everyOne(
    `all ${COUNT} held (${reason})`,
    (p) =>
      condition(p, 'Provisioned')?.reason === 'RepairHeld' &&
      (condition(p, 'Provisioned')?.message ?? '').startsWith('repair held'),
    30_000,
  );
  expect(await heldCount(reason)).toBe(COUNT);
  // Well past the grace: still held, nothing deleted, every proxy on its instance.
  const since = Math.max(...held.map((p) => Date.parse(condition(p, 'Healthy')!.lastTransitionTime)));
  await sleep(Math.max(0, since + (GRACE + 6) * 1000 - Date.now()));
  expect(deletes).toEqual([]);
  for (const p of await all()) {
    expect(p.status?.providerID).toBe(instances.get(p.metadata.name));
    expect(condition(p, 'Provisioned')?.reason).toBe('RepairHeld');
    expect(p.status?.replacement).toBeUndefined();
  }
}

describe('a shared cause never replaces the fleet (issue 44 item 2)', () => {
  it(`${COUNT} proxies: a target outage and a path outage past the grace replace none; then one dead proxy is replaced alone`, async () => {
    const base = managedSpec(suite.target);
    const spec = { ...base, healthCheck: { ...base.healthCheck, probeURL } };
    await Promise.all(names.map((n) => api.create(n, { spec })));
    const ready = await everyOne(`all ${COUNT} Ready`, isReady, 90_000);
    const instances = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));

    // 1. The probe target goes down: the operator's direct check fails too.
    down = true;
    await heldThrough('ProbeTargetUnreachable', instances);
    const message = condition(await api.get(names[0]), 'Provisioned')!.message;
    expect(message).toContain(`the probe target ${probeURL} fails when the operator checks it directly`);
    const events = await eventsOnceThere(kc, namespace, names[0], 'RepairHeld');
    expect(events).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Warning', reason: 'RepairHeld' })]),
    );
    down = false;
    await everyOne(`all ${COUNT} Ready again`, isReady, 30_000);
    await eventually('no repair held', async () =>
      (await heldCount('ProbeTargetUnreachable')) === 0 ? true : undefined,
    );

    // 2. Only the way through the proxies breaks (the target answers the operator directly):
    // all 20 Unhealthy at once is more than 20% of the provider's proxies.
    downThroughProxies = true;
    await heldThrough('FleetUnhealthy', instances);
    expect(condition(await api.get(names[1]), 'Provisioned')!.message).toContain(
      "more than 20% of provider mock's proxies are Unhealthy at once",
    );
    downThroughProxies = false;
    await everyOne(`all ${COUNT} Ready again`, isReady, 30_000);

    // 3. One proxy really dies: it alone is replaced, after its grace.
    await provider.kill(instances.get(names[7])!);
    const replaced = await eventually(
      'the dead proxy replaced and Ready on a new instance',
      async () => {
        const p = await api.get(names[7]);
        return deletes.length > 0 && isReady(p) && p.status?.ip !== DEAD_IP ? p : undefined;
      },
      60_000,
    );
    expect(replaced.status?.replacement).toBeUndefined();
    expect(deletes).toEqual([instances.get(names[7])]);
    await eventsOnceThere(kc, namespace, names[7], 'ReplacingUnhealthy');
    for (const p of await all()) {
      if (p.metadata.name === names[7]) continue;
      expect(p.status?.providerID).toBe(instances.get(p.metadata.name));
      expect(isReady(p)).toBe(true);
    }
  }, 240_000);
});

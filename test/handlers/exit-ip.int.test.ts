// The exit IP end to end on a real API server: External proxies that are real forward proxies
// on loopback aliases (they connect out from their own address, so each one's exit IP is its
// own), the local target's /ip echo, the whole operator (health runner, reconciler, discovery).
import { CONDITION_HEALTHY } from '../../crds/proxy-types.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { DiscoveryApiError, DiscoveryClient } from '../../client/src/index.js';
import { condition, eventsFor, eventually, fastHealthCheck, operatorSuite } from './operator-fixture.js';

// No provider: External proxies only.
const suite = operatorSuite('exitip', {
  providers: () => ({}),
  // Re-read every half second, so a broken echo service shows within the test.
  settings: { exitIPRefreshMillis: 500 },
});
const { api, kc, namespace } = suite;
let client: DiscoveryClient;
const forwarders = new Map<string, ForwardProxy>();

async function forwarder(host: string): Promise<ForwardProxy> {
  const fp = await startForwardProxy({ host, port: await freePort() });
  forwarders.set(host, fp);
  return fp;
}

function external(fp: ForwardProxy, exitIPURL: string | undefined) {
  return {
    spec: {
      mode: 'External',
      endpoint: { host: fp.host, port: fp.port },
      maxLeases: 5,
      healthCheck: { ...fastHealthCheck(suite.target), ...(exitIPURL ? { exitIPURL } : {}) },
    },
  };
}

const exitIPOf = (name: string) => async () => {
  const p = await api.get(name);
  return p.status?.exitIP;
};

beforeAll(async () => {
  client = new DiscoveryClient({ baseUrl: suite.op.discoveryURL });
  await api.create('exit-a', external(await forwarder('127.0.0.2'), suite.target.exitIPURL));
  await api.create('exit-b', external(await forwarder('127.0.0.3'), suite.target.exitIPURL));
  await api.create('no-exit', external(await forwarder('127.0.0.5'), undefined));
  await forwarder('127.0.0.4');
}, 120_000);

afterAll(async () => {
  await Promise.all([...forwarders.values()].map((p) => p.close()));
});

it('records each proxy’s observed egress address in status.exitIP, with an Event, the wide column and the discovery object', async () => {
  await eventually('exit-a has its exit IP', async () =>
    (await exitIPOf('exit-a')()) === '127.0.0.2' ? true : undefined,
  );
  await eventually('exit-b has its exit IP', async () =>
    (await exitIPOf('exit-b')()) === '127.0.0.3' ? true : undefined,
  );
  const events = await eventually('the ExitIPChanged Event', async () => {
    const found = (await eventsFor(kc, namespace, 'exit-a')).filter((e) => e.reason === 'ExitIPChanged');
    return found.length > 0 ? found : undefined;
  });
  expect(events).toEqual([
    expect.objectContaining({ type: 'Normal', message: expect.stringContaining('127.0.0.2') }),
  ]);

  const table = await api.table();
  const column = table.columnDefinitions.findIndex((c) => c.name === 'Exit-IP');
  expect(column).toBeGreaterThan(0);
  expect(table.rows.map((r) => r.cells[column] ?? '').sort()).toEqual(['', '127.0.0.2', '127.0.0.3']);

  const proxy = await eventually('discovery shows the exit IP', async () => {
    const p = await client.getProxy(`${namespace}/exit-a`);
    return p.exitIP === '127.0.0.2' ? p : undefined;
  });
  expect(proxy.healthy).toBe(true);
  const listed = await client.listProxies();
  expect(listed.find((p) => p.id === `${namespace}/no-exit`)).not.toHaveProperty('exitIP');
});

it('leases by exit IP: an address or a CIDR block; a proxy of unknown exit IP never matches; bad input is a 400 naming exitIP', async () => {
  await eventually('all three listed healthy', async () =>
    (await client.listProxies({ healthy: true })).length === 3 ? true : undefined,
  );
  for (const term of ['127.0.0.3', '127.0.0.3/32', '::ffff:127.0.0.3']) {
    const lease = await client.lease({ exitIP: term, ttlSeconds: 30 });
    expect([term, lease.proxy.id, lease.proxy.exitIP]).toEqual([term, `${namespace}/exit-b`, '127.0.0.3']);
    await client.release(lease.leaseID);
  }
  const block: string[] = [];
  const leases = [];
  for (let i = 0; i < 4; i++) {
    const lease = await client.lease({ exitIP: '127.0.0.0/29', ttlSeconds: 30 });
    leases.push(lease);
    block.push(lease.proxy.id);
  }
  // no-exit listens inside the block too, but its exit IP is not known: never leased by one.
  expect(new Set(block)).toEqual(new Set([`${namespace}/exit-a`, `${namespace}/exit-b`]));
  for (const lease of leases) await client.release(lease.leaseID);

  await expect(client.lease({ exitIP: '10.0.0.0/8' })).rejects.toMatchObject({
    status: 409,
    code: 'no_match',
  });
  for (const bad of ['127.0.0.1/8', 'nope', '127.0.0.0/33']) {
    const err = await client.lease({ exitIP: bad }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DiscoveryApiError);
    expect(err).toMatchObject({ status: 400, message: expect.stringContaining('exitIP') });
  }
});

it('a new endpoint clears the exit IP (ExitIPCleared) until it is read through it; no exitIP selector matches the old one meanwhile', async () => {
  const moved = forwarders.get('127.0.0.4')!;
  await api.patchSpec('exit-a', { endpoint: { host: moved.host, port: moved.port } });
  await eventually('exit-a has its new exit IP', async () =>
    (await exitIPOf('exit-a')()) === '127.0.0.4' ? true : undefined,
  );
  const events = await eventually('the clear and the first read', async () => {
    const found = await eventsFor(kc, namespace, 'exit-a');
    return found.some((e) => e.reason === 'ExitIPCleared') &&
      found.some((e) => e.message === 'exit IP is 127.0.0.4 (first read through the proxy)')
      ? found
      : undefined;
  });
  expect(events).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        reason: 'ExitIPCleared',
        type: 'Normal',
        message:
          'exit IP 127.0.0.2 cleared: the proxy moved to address 127.0.0.4; it is read again through it',
      }),
    ]),
  );
  // Nothing ever claims the old address again.
  await expect(client.lease({ exitIP: '127.0.0.2' })).rejects.toMatchObject({ status: 409 });
});

it("an echo at the proxy's own address is refused (Forgeable): the proxy would answer itself", async () => {
  const own = forwarders.get('127.0.0.5')!;
  await api.patchSpec('no-exit', { healthCheck: { exitIPURL: `http://${own.host}:${own.port}/ip` } });
  await eventually('the refusal counted', async () => {
    const metric = await suite.op.registry
      .getSingleMetric('proxy_operator_exit_ip_read_failures_total')
      ?.get();
    return metric?.values.some((v) => v.labels.reason === 'Forgeable' && v.value >= 1) ? true : undefined;
  });
  expect((await api.get('no-exit')).status?.exitIP).toBeUndefined();
  await api.patchSpec('no-exit', { healthCheck: { exitIPURL: null } });
});

it('an echo service that stops answering with an address keeps the last exit IP and the proxy healthy (warn + metric)', async () => {
  // The local target's other pages answer 200 with a sentence: not an address.
  await api.patchSpec('exit-b', { healthCheck: { exitIPURL: `${suite.target.url}not-an-ip` } });
  await eventually('failed reads counted', async () => {
    const metric = await suite.op.registry
      .getSingleMetric('proxy_operator_exit_ip_read_failures_total')
      ?.get();
    const notAnIP = metric?.values.find((v) => v.labels.reason === 'NotAnIP');
    return notAnIP !== undefined && notAnIP.value >= 2 ? true : undefined;
  });
  const p = await api.get('exit-b');
  expect(p.status?.exitIP).toBe('127.0.0.3');
  expect(condition(p, CONDITION_HEALTHY)?.status).toBe('True');
  expect((await client.getProxy(`${namespace}/exit-b`)).exitIP).toBe('127.0.0.3');
});

it('removing exitIPURL removes status.exitIP (it would only go stale)', async () => {
  const p = await api.get('exit-b');
  const { exitIPURL: _dropped, ...healthCheck } = p.spec.healthCheck;
  await api.replace({ ...p, spec: { ...p.spec, healthCheck } });
  await eventually('status.exitIP removed', async () =>
    (await exitIPOf('exit-b')()) === undefined ? true : undefined,
  );
});

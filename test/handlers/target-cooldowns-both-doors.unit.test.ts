// proxy_operator_target_cooldowns_total counts every ban once, whichever door it came in
// through: a client's report to the discovery API (door="api"), or the gateway's own, on a
// ban status it saw on plain HTTP or a tunnel client's session report to it (door="gateway").
// One counter for both doors over one book, wired as the operator wires them.
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { request } from 'undici';
import { createDiscoveryApp } from '../../discovery/app.js';
import { DiscoveryServer } from '../../discovery/server.js';
import {
  TARGET_COOLDOWNS_METRIC,
  TargetCooldownMetrics,
  type CooldownDoor,
} from '../../discovery/target-cooldown-metrics.js';
import { gatewayCooldowns } from '../../handlers/gateway-book.js';
import {
  basic,
  PROXY_IPS,
  startWorld,
  until,
  viaGateway,
  viaTunnel,
  TOKEN,
  type World,
} from '../gateway/gateway-world.js';

const logger = pino({ level: 'silent' });

let world: World;
let cooldowns: TargetCooldownMetrics;
let registry: Registry;
let api: DiscoveryServer;
let apiURL: string;

/** The counter's value per door for one target label (0 when it has no series). */
async function counted(target: string): Promise<Record<CooldownDoor, number>> {
  const values = (await registry.getSingleMetric(TARGET_COOLDOWNS_METRIC)!.get()).values;
  const of = (door: CooldownDoor) =>
    values.find((v) => v.labels.target === target && v.labels.door === door)?.value ?? 0;
  return { api: of('api'), gateway: of('gateway') };
}

beforeEach(async () => {
  // One counter in one registry, handed to both doors, as createProxyOperator does.
  registry = new Registry();
  cooldowns = new TargetCooldownMetrics(registry, true);
  world = await startWorld({}, 5, undefined, undefined, gatewayCooldowns(cooldowns, logger));
  const app = createDiscoveryApp({
    catalog: world.catalog,
    leases: world.store,
    token: TOKEN,
    logger,
    registry,
    metricsTargetNames: true,
    targetCooldowns: cooldowns,
  });
  api = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, logger);
  await api.start();
  apiURL = `http://127.0.0.1:${api.port}`;
});

afterEach(async () => {
  await api.stop();
  await world.close();
});

async function apiCall(
  method: 'POST',
  path: string,
  body: unknown,
): Promise<{ status: number; body: unknown }> {
  const res = await request(`${apiURL}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: await res.body.json() };
}

describe('the target cooldown metric counts each ban once, by door', () => {
  it('a ban the gateway sees on plain HTTP counts once, as door="gateway"', async () => {
    const url = `http://127.0.0.1:${world.site.httpPort}/`;
    const first = (await viaGateway(world.port, url, basic('session-m1'))).body.trim();
    world.site.banned.add(first);
    expect((await viaGateway(world.port, url, basic('session-m1'))).status).toBe(403);
    // The report is made after the answer: wait for the book to hold the cooldown.
    await until(async () => (await counted('127.0.0.1')).gateway > 0);
    const standing = await world.store.standing(`fleet/p${PROXY_IPS.indexOf(first)}`);
    expect(standing.cooldowns.map((c) => c.target)).toEqual(['127.0.0.1']);
    expect(await counted('127.0.0.1')).toEqual({ api: 0, gateway: 1 });
  });

  it('a tunnel client\'s session report to the gateway counts once, as door="gateway"', async () => {
    const tunnel = await viaTunnel(
      world.port,
      world.site.httpsPort,
      world.site.ca,
      basic('session-k1'),
      true,
    );
    const report = await fetch(`http://127.0.0.1:${world.port}/v1/sessions/k1/report`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ target: '127.0.0.1', result: 'rate_limited' }),
    });
    expect(report.status).toBe(200);
    tunnel.close!();
    expect(await counted('127.0.0.1')).toEqual({ api: 0, gateway: 1 });
  });

  it('a report to the API counts once, as door="api", in the same series family', async () => {
    const lease = await apiCall('POST', '/v1/leases', { ttlSeconds: 60, target: 'shop.example' });
    expect(lease.status).toBe(201);
    const { leaseID } = lease.body as { leaseID: string };
    const report = await apiCall('POST', `/v1/leases/${leaseID}/report`, {
      result: 'banned',
      target: 'shop.example',
    });
    expect(report.status).toBe(200);
    expect(await counted('shop.example')).toEqual({ api: 1, gateway: 0 });
  });

  it('ok and unreachable reports start no cooldown and count nothing', async () => {
    const url = `http://127.0.0.1:${world.site.httpPort}/`;
    for (let i = 0; i < 3; i++)
      expect((await viaGateway(world.port, url, basic('session-ok'))).status).toBe(200);
    const lease = await apiCall('POST', '/v1/leases', { ttlSeconds: 60 });
    const { leaseID } = lease.body as { leaseID: string };
    expect(
      (await apiCall('POST', `/v1/leases/${leaseID}/report`, { result: 'ok', target: 'a.example' })).status,
    ).toBe(200);
    expect((await registry.getSingleMetric(TARGET_COOLDOWNS_METRIC)!.get()).values).toEqual([]);
  });
});

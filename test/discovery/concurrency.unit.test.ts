// Hundreds of parallel lease requests never overfill a proxy, never lease an unhealthy or
// list-only one, and never hand a proxy cooling down for a target to that target.
import { Pool, type Dispatcher } from 'undici';
import type { ProxyRecord } from '../../discovery/catalog.js';
import { startHarness, type Harness } from './api-harness.js';
import { proxy } from './fixtures.js';

const TARGET = 'example.com';

const fleet = (): ProxyRecord[] => [
  proxy('ns/p1', { maxLeases: 1, latencyMillis: 10 }),
  proxy('ns/p2', { maxLeases: 2, latencyMillis: 20 }),
  proxy('ns/p3', { maxLeases: 3, latencyMillis: 30 }),
  proxy('ns/p5', { maxLeases: 5, latencyMillis: 50 }),
  proxy('ns/cooling', { maxLeases: 4, latencyMillis: 1 }),
  proxy('ns/unhealthy', { maxLeases: 50, healthy: false, phase: 'Unhealthy', latencyMillis: 0 }),
  proxy('ns/list-only', { maxLeases: 0, latencyMillis: 0 }),
];

interface Granted {
  leaseID: string;
  proxy: { id: string; activeLeases: number; maxLeases: number };
}

describe('concurrent lease requests', () => {
  let h: Harness;
  let pool: Pool;
  beforeEach(async () => {
    h = await startHarness({ proxies: fleet() });
    pool = new Pool(h.baseURL, { connections: 32 });
    // Bench ns/cooling for TARGET: lease it (lowest latency), report a ban, release.
    const first = await h.call('POST', '/v1/leases', { body: { target: TARGET } });
    const { leaseID, proxy: leased } = first.body as Granted;
    expect(leased.id).toBe('ns/cooling');
    await h.call('POST', `/v1/leases/${leaseID}/report`, { body: { result: 'banned' } });
    await h.call('DELETE', `/v1/leases/${leaseID}`);
  });
  afterEach(async () => {
    await pool.close();
    await h.stop();
  });

  async function post(path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    const options: Dispatcher.RequestOptions = {
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    };
    if (body !== undefined) options.body = JSON.stringify(body);
    const response = await pool.request(options);
    const text = await response.body.text();
    return { status: response.statusCode, body: text === '' ? undefined : JSON.parse(text) };
  }

  it('400 parallel requests fill every proxy exactly to its cap and no further', async () => {
    const requests = Array.from({ length: 400 }, (_, i) => ({
      target: i % 2 === 0 ? TARGET : undefined,
      ttlSeconds: 600,
    }));
    const responses = await Promise.all(
      requests.map((body) => post('/v1/leases', body).then((r) => ({ ...r, target: body.target }))),
    );

    expect(responses.filter((r) => r.status !== 201 && r.status !== 409)).toEqual([]);
    const granted = responses.filter((r) => r.status === 201);
    const perProxy = new Map<string, number>();
    for (const r of granted) {
      const id = (r.body as Granted).proxy.id;
      perProxy.set(id, (perProxy.get(id) ?? 0) + 1);
      if (r.target === TARGET) expect(id).not.toBe('ns/cooling');
    }
    // Every leasable slot is taken once: 1+2+3+5 for everyone, 4 on ns/cooling for untargeted requests.
    expect(Object.fromEntries(perProxy)).toEqual({
      'ns/p1': 1,
      'ns/p2': 2,
      'ns/p3': 3,
      'ns/p5': 5,
      'ns/cooling': 4,
    });
    for (const r of responses.filter((r) => r.status === 409)) {
      expect(r.body).toMatchObject({ error: expect.stringMatching(/^(all_busy|all_cooling_down)$/) });
    }
    for (const [id, count] of perProxy) expect(await h.activeLeases(id)).toBe(count);
  });

  it('churn of parallel lease-and-release never reports a proxy above its cap', async () => {
    const worker = async () => {
      const observed: Granted['proxy'][] = [];
      for (let i = 0; i < 15; i++) {
        const response = await post('/v1/leases', { ttlSeconds: 600 });
        if (response.status !== 201) continue;
        const lease = response.body as Granted;
        observed.push(lease.proxy);
        const release = await pool.request({ path: `/v1/leases/${lease.leaseID}`, method: 'DELETE' });
        await release.body.text();
      }
      return observed;
    };
    const observed = (await Promise.all(Array.from({ length: 30 }, worker))).flat();
    expect(observed.length).toBeGreaterThan(0);
    for (const p of observed) {
      expect(p.activeLeases).toBeLessThanOrEqual(p.maxLeases);
      expect(['ns/unhealthy', 'ns/list-only']).not.toContain(p.id);
    }
    expect((await h.store.totals()).activeLeases).toBe(0);
  });
});

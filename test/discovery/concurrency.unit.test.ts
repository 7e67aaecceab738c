// Hundreds of parallel requests never overfill a proxy, never lease an unhealthy or list-only
// one, never hand a proxy cooling down for a target to that target, and never bind a session
// to two proxies at once.
import { Pool, type Dispatcher } from 'undici';
import type { ProxyCatalog, ProxyRecord } from '../../book/catalog.js';
import { isLeasable } from '../../book/lease-selection.js';
import type {
  AcquireResult,
  BatchReport,
  Lease,
  LeaseRequest,
  HealthObservation,
  LeaseStore,
  ProbeRequestListener,
  ReportDetails,
  ReportOutcome,
  ReportResult,
} from '../../book/lease-store.js';
import type { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { startHarness, type Harness } from './api-harness.js';
import { proxy } from '../book/fixtures.js';

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

/**
 * Watches every store call in the order the server makes them and records any broken
 * invariant at the moment it happens: a lease above maxLeases, on a proxy that is not
 * leasable or is cooling down for the lease's target, or a session bound to two proxies.
 */
class InvariantWatch implements LeaseStore {
  readonly violations: string[] = [];
  readonly grants: Lease[] = [];
  /** `${proxyID} ${target}` → cooldown end, as reported back by the store. */
  private readonly cooling = new Map<string, number>();
  private readonly sessions = new Map<string, string>();

  constructor(
    private readonly inner: MemoryLeaseStore,
    private readonly catalog: () => ProxyCatalog,
    private readonly now: () => number,
  ) {}

  async acquire(request: LeaseRequest): Promise<AcquireResult> {
    const result = await this.inner.acquire(request);
    if (!result.granted) return result;
    const { lease, usage, session } = result;
    this.grants.push(lease);
    const current = this.catalog().get(lease.proxyID);
    if (current === undefined || !isLeasable(current))
      this.violations.push(`${lease.id}: ${lease.proxyID} not leasable`);
    if (usage.activeLeases > lease.proxy.maxLeases)
      this.violations.push(
        `${lease.id}: ${lease.proxyID} at ${usage.activeLeases} > ${lease.proxy.maxLeases}`,
      );
    if ((this.cooling.get(`${lease.proxyID} ${lease.target ?? ''}`) ?? 0) > this.now())
      this.violations.push(`${lease.id}: ${lease.proxyID} cooling down for '${lease.target ?? ''}'`);
    if (session !== undefined) {
      const before = this.sessions.get(session.key);
      if (!session.moved && before !== undefined && before !== lease.proxyID)
        this.violations.push(`session ${session.key} silently moved ${before} → ${lease.proxyID}`);
      if (session.moved && (before === undefined || before === lease.proxyID))
        this.violations.push(`session ${session.key} reported moved from ${before} to ${lease.proxyID}`);
      this.sessions.set(session.key, lease.proxyID);
    }
    return result;
  }

  observeHealth(proxyID: string, observation: HealthObservation) {
    return this.inner.observeHealth(proxyID, observation);
  }

  onProbeRequest(listener: ProbeRequestListener) {
    return this.inner.onProbeRequest(listener);
  }

  async report(leaseID: string, result: ReportResult, details?: ReportDetails, owner?: string) {
    const outcome = await this.inner.report(leaseID, result, details, owner);
    this.cooled(outcome);
    return outcome;
  }

  async reportMany(reports: readonly BatchReport[], owner?: string, requestID?: string) {
    const outcomes = await this.inner.reportMany(reports, owner, requestID);
    outcomes.forEach((outcome) => this.cooled(outcome));
    return outcomes;
  }

  private cooled(outcome: ReportOutcome | undefined): void {
    if (outcome?.cooldownUntil === undefined) return;
    const key = `${outcome.lease.proxyID} ${outcome.target ?? ''}`;
    this.cooling.set(key, Math.max(this.cooling.get(key) ?? 0, outcome.cooldownUntil.getTime()));
  }

  async endSession(key: string, owner?: string) {
    await this.inner.endSession(key, owner);
    this.sessions.delete(key);
  }

  renew = (id: string, ttl?: number, owner?: string, requestID?: string) =>
    this.inner.renew(id, ttl, owner, requestID);
  release = (id: string, owner?: string, requestID?: string) => this.inner.release(id, owner, requestID);
  usage = (ids: readonly string[]) => this.inner.usage(ids);
  standing = (id: string) => this.inner.standing(id);
  get = (id: string, owner?: string) => this.inner.get(id, owner);
  totals = () => this.inner.totals();
  start = () => this.inner.start();
  stop = () => this.inner.stop();
}

describe('500 parallel requests mixing sessions, renewals, releases and reports', () => {
  const mixedFleet = (): ProxyRecord[] =>
    Array.from({ length: 12 }, (_, i) =>
      proxy(`ns/p${i}`, {
        maxLeases: [2, 5, 10, 20][i % 4],
        latencyMillis: 10 * (i % 5),
        attributes: { geo: i % 2 === 0 ? 'eu' : 'us' },
        ...(i === 11 ? { healthy: false, phase: 'Unhealthy' } : {}),
      }),
    );

  it('keeps every invariant', async () => {
    let watch: InvariantWatch | undefined;
    const h: Harness = await startHarness({
      proxies: mixedFleet(),
      // The store's invariants under every interleaving: 64 lists at once must all be served,
      // not meet the per-token cap on lists in flight (hostile-tokens.unit.test.ts tests that).
      maxConcurrentLists: 1000,
      wrapStore: (store) =>
        (watch = new InvariantWatch(
          store,
          () => h.catalog,
          () => h.clock.now(),
        )),
    });
    const pool = new Pool(h.baseURL, { connections: 64 });
    const send = async (method: string, path: string, body?: unknown) => {
      const response = await pool.request({
        path,
        method: method as Dispatcher.HttpMethod,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.body.text();
      return { status: response.statusCode, body: text === '' ? undefined : (JSON.parse(text) as Granted) };
    };
    try {
      const random = (() => {
        let a = 500;
        return () => (a = (a * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      })();
      const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
      const statuses: number[] = [];
      // 250 tasks of two requests each, all in flight at once.
      const task = async (i: number) => {
        const leased = await send('POST', '/v1/leases', {
          ttlSeconds: 600,
          ...(random() < 0.6 ? { session: `s${i % 20}` } : {}),
          ...(random() < 0.5 ? { target: pick(['a.example', 'b.example']) } : {}),
          ...(random() < 0.3 ? { selector: { geo: pick(['eu', 'us']) } } : {}),
        });
        statuses.push(leased.status);
        const roll = random();
        if (leased.status !== 201) {
          statuses.push(
            (
              await send(
                roll < 0.5 ? 'GET' : 'DELETE',
                roll < 0.5 ? '/v1/proxies' : `/v1/sessions/s${i % 20}`,
              )
            ).status,
          );
          return;
        }
        const id = leased.body!.leaseID;
        const follow =
          roll < 0.3
            ? send('POST', `/v1/leases/${id}/report`, {
                result: pick(['banned', 'rate_limited', 'ok']),
                ...(random() < 0.7 ? { target: pick(['a.example', 'b.example']) } : {}),
              })
            : roll < 0.55
              ? send('POST', `/v1/leases/${id}/renew`, random() < 0.5 ? {} : { ttlSeconds: 900 })
              : roll < 0.85
                ? send('DELETE', `/v1/leases/${id}`)
                : send('DELETE', `/v1/sessions/s${i % 20}`);
        statuses.push((await follow).status);
      };
      const flip = new Promise<void>((resolve) =>
        setTimeout(() => {
          // Mid-run, two proxies stop being leasable.
          h.catalog.proxies = mixedFleet().map((p) =>
            p.id === 'ns/p0' || p.id === 'ns/p5' ? { ...p, healthy: false, phase: 'Unhealthy' } : p,
          );
          resolve();
        }, 20),
      );
      await Promise.all([...Array.from({ length: 250 }, (_, i) => task(i)), flip]);

      expect(statuses).toHaveLength(500);
      expect(statuses.filter((s) => ![200, 201, 204, 409].includes(s))).toEqual([]);
      expect(watch!.grants.length).toBeGreaterThan(50);
      expect(statuses.filter((s) => s === 409).length).toBeGreaterThan(0);
      expect(watch!.violations).toEqual([]);
      for (const p of mixedFleet()) expect(await h.activeLeases(p.id)).toBeLessThanOrEqual(p.maxLeases);
      expect(watch!.grants.some((l) => l.proxyID === 'ns/p11')).toBe(false);
    } finally {
      await pool.close();
      await h.stop();
    }
  });
});

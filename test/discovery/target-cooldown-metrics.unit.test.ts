import { Registry } from 'prom-client';
import {
  MAX_TARGET_SERIES,
  NO_TARGET,
  OTHER_TARGETS,
  TARGET_COOLDOWNS_METRIC,
  TargetCooldownMetrics,
} from '../../discovery/target-cooldown-metrics.js';
import { startHarness } from './api-harness.js';
import { proxy } from '../book/fixtures.js';

/** Cooldowns by target, summed over the doors (as the alert and the dashboard sum them). */
async function series(registry: Registry): Promise<Record<string, number>> {
  const metric = await registry.getSingleMetric(TARGET_COOLDOWNS_METRIC)!.get();
  const sums: Record<string, number> = {};
  for (const v of metric.values)
    sums[String(v.labels.target)] = (sums[String(v.labels.target)] ?? 0) + v.value;
  return sums;
}

describe('proxy_operator_target_cooldowns_total: cooldowns by target, bounded', () => {
  it.each<[string, Array<string | undefined>, Record<string, number>]>([
    [
      'a named target gets its own series',
      ['a.example', 'a.example', 'b.example'],
      { 'a.example': 2, 'b.example': 1 },
    ],
    ['no target is the global pool', [undefined, undefined], { [NO_TARGET]: 2 }],
  ])('%s', async (_what, targets, expected) => {
    const registry = new Registry();
    // Named (--metrics-target-names): the default pseudonyms are tenants.unit.test.ts's.
    const metrics = new TargetCooldownMetrics(registry, true);
    for (const t of targets) metrics.countCooldown(t, 'api');
    expect(await series(registry)).toEqual(expected);
  });

  it(`past ${MAX_TARGET_SERIES} targets, new ones share "${OTHER_TARGETS}"; the first ones keep theirs`, async () => {
    const registry = new Registry();
    const metrics = new TargetCooldownMetrics(registry, true);
    for (let i = 0; i < MAX_TARGET_SERIES + 10; i++) metrics.countCooldown(`site-${i}.example`, 'api');
    metrics.countCooldown('site-0.example', 'gateway');
    const seen = await series(registry);
    expect(Object.keys(seen)).toHaveLength(MAX_TARGET_SERIES + 1);
    expect(seen[OTHER_TARGETS]).toBe(10);
    expect(seen['site-0.example']).toBe(2);
  });

  it('one target is one place under the cap whichever door its bans come through', async () => {
    const registry = new Registry();
    const metrics = new TargetCooldownMetrics(registry, true);
    for (let i = 0; i < MAX_TARGET_SERIES; i++) metrics.countCooldown(`site-${i}.example`, 'api');
    metrics.countCooldown('site-0.example', 'gateway');
    metrics.countCooldown('late.example', 'gateway');
    const values = (await registry.getSingleMetric(TARGET_COOLDOWNS_METRIC)!.get()).values;
    expect(values.filter((v) => v.labels.door === 'gateway').map((v) => v.labels.target)).toEqual([
      'site-0.example',
      OTHER_TARGETS,
    ]);
  });

  it('counts the cooldowns reports start through the API, not ok reports nor those extending a running one', async () => {
    const h = await startHarness({
      proxies: [proxy('ns/a', { ip: '10.0.0.1', maxLeases: 5 })],
      app: { metricsTargetNames: true },
    });
    try {
      const lease = (await h.call('POST', '/v1/leases', { body: { ttlSeconds: 60 } })).body as {
        leaseID: string;
      };
      const report = (result: string, target?: string) =>
        h.call('POST', `/v1/leases/${lease.leaseID}/report`, { body: { result, target } });
      expect((await report('banned', 'shop.example')).status).toBe(200);
      expect((await report('rate_limited', 'shop.example')).status).toBe(200);
      expect((await report('ok', 'news.example')).status).toBe(200);
      expect((await report('banned')).status).toBe(200);
      // The rate limit lengthened shop.example's running cooldown: one proxy benched, counted once.
      expect(await series(h.registry)).toEqual({ 'shop.example': 1, [NO_TARGET]: 1 });
    } finally {
      await h.stop();
    }
  });

  // ProxyTargetBanStorm compares this counter's increase with a quarter of the Ready proxies
  // (at least 5): it counts proxies benched, so six workers banned on one proxy are one.
  it.each<[string, number, number, number]>([
    ['six workers banned on one proxy of twenty', 1, 6, 1],
    ['one worker banned on each of six proxies', 6, 1, 6],
    ['three workers banned on each of two proxies', 2, 3, 2],
  ])('%s: %d proxies × %d reports count %d', async (_, proxies, workers, counted) => {
    const h = await startHarness({
      proxies: Array.from({ length: 20 }, (_x, i) =>
        proxy(`ns/p${String(i).padStart(2, '0')}`, {
          maxLeases: 10,
          attributes: { pool: i < proxies ? 'hot' : 'cold' },
        }),
      ),
      app: { metricsTargetNames: true },
    });
    try {
      const leases: string[] = [];
      for (let i = 0; i < proxies * workers; i++) {
        const leased = await h.call('POST', '/v1/leases', {
          body: { ttlSeconds: 60, target: 'shop.example', selector: { pool: 'hot' } },
        });
        expect(leased.status).toBe(201);
        leases.push((leased.body as { leaseID: string }).leaseID);
      }
      for (const id of leases)
        expect((await h.call('POST', `/v1/leases/${id}/report`, { body: { result: 'banned' } })).status).toBe(
          200,
        );
      expect(await series(h.registry)).toEqual({ 'shop.example': counted });
    } finally {
      await h.stop();
    }
  });
});

// Every proxy rests for a site (its rate limits, all_cooling_down): the gateway holds the
// request until the first rest ends, within a bound, instead of a 503 the crawler retries at
// once (bench:crawl's tight sliding window: 60 of 200 pages). On real parts (gateway-world.ts).
import { restWait } from '../../gateway/gateway-context.js';
import { basic, PROXY_IPS, startWorld, viaGateway, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

describe('restWait: whether a refused request waits, and how long', () => {
  it.each([
    ['every proxy rests, the first rest ends soon', 'all_cooling_down', 1000, 0, 10_000, 1050],
    ['the rest would end past the bound', 'all_cooling_down', 30_000, 0, 10_000, undefined],
    ['waited already: the bound counts the whole request', 'all_cooling_down', 1000, 9000, 10_000, undefined],
    ['no end known', 'all_cooling_down', undefined, 0, 10_000, undefined],
    ['every proxy full: never a wait (shared or 503 at once)', 'all_busy', 1000, 0, 10_000, undefined],
    ['nothing matches', 'no_match', undefined, 0, 10_000, undefined],
  ] as const)('%s', (_name, reason, retryAfterMs, waited, max, wait) => {
    const refusal = {
      granted: false as const,
      reason,
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
    expect(restWait(refusal, waited, max, 0.5)).toBe(wait);
  });
});

/** Every proxy of the world rate-limited for the site's host, for `seconds`. */
async function restAll(w: World, seconds: number): Promise<void> {
  const leases = [];
  for (let i = 0; i < PROXY_IPS.length; i++) {
    const r = await w.store.acquire({ selector: {}, ttlSeconds: 60, target: '127.0.0.1', owner: 'team-a' });
    if (!r.granted) throw new Error(r.reason);
    leases.push(r.lease.id);
  }
  for (const id of leases) {
    await w.store.report(id, 'rate_limited', { target: '127.0.0.1', retryAfterSeconds: seconds }, 'team-a');
    await w.store.release(id, 'team-a');
  }
}

describe('every proxy resting for the site', () => {
  it('waits for the first rest to end, then answers through a proxy', async () => {
    world = await startWorld();
    await restAll(world, 1);
    const started = Date.now();
    const answer = await viaGateway(
      world.port,
      `http://127.0.0.1:${world.site.httpPort}/`,
      basic('session-w1'),
    );
    expect(answer.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
  });

  it('answers 503 all_cooling_down at once when the rest ends past the bound', async () => {
    world = await startWorld({ maxRestWaitMs: 5000 });
    await restAll(world, 30);
    const started = Date.now();
    const answer = await viaGateway(
      world.port,
      `http://127.0.0.1:${world.site.httpPort}/`,
      basic('session-w2'),
    );
    expect(answer.status).toBe(503);
    expect(answer.headers['x-gateway-error']).toMatch(/^all_cooling_down: /);
    expect(Number(answer.headers['retry-after'])).toBeGreaterThan(20);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

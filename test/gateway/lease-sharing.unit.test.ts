// More gateway sessions than the fleet has slots (Crawlee's default pool makes up to 1,000):
// a session the book cannot place shares a lease the gateway holds for the same token,
// selector and target, instead of a 503 all_busy. On real parts (gateway-world.ts).
import { leastLoaded, type HeldLease } from '../../gateway/lease-pool.js';
import { basic, PROXY_IPS, startWorld, until, viaGateway, viaTunnel, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

const MAX_LEASES = 2;
const SLOTS = PROXY_IPS.length * MAX_LEASES; // 6
const SESSIONS = 24;
const IDS = PROXY_IPS.map((_, i) => `fleet/p${i}`);

/** Samples the book's leases per proxy until stopped; the most any proxy held at once. */
function capWatch(w: World): { stop(): Promise<number> } {
  let most = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const u of await w.store.usage(IDS)) most = Math.max(most, u.activeLeases);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return most;
    },
  };
}

const plain = (w: World, session: string) =>
  viaGateway(w.port, `http://127.0.0.1:${w.site.httpPort}/`, basic(`session-${session}`));
const tunnel = (w: World, session: string) =>
  viaTunnel(w.port, w.site.httpsPort, w.site.ca, basic(`session-${session}`));

describe('more sessions than slots', () => {
  it('answers every request (none 503), keeps each session on one exit, and the book never passes maxLeases', async () => {
    world = await startWorld({ idleMs: 3000 }, MAX_LEASES);
    const watch = capWatch(world);
    const exits = new Map<string, Set<string>>();
    const statuses: number[] = [];
    // Every session at once, each HTTP, a tunnel, then HTTP again: all within the idle timeout.
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_, i) => {
        const session = `c${i}`;
        const seen = new Set<string>();
        for (const answer of [
          await plain(world, session),
          await tunnel(world, session),
          await plain(world, session),
        ]) {
          statuses.push(answer.status);
          seen.add(answer.body.trim());
        }
        exits.set(session, seen);
      }),
    );
    const most = await watch.stop();
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(statuses).toHaveLength(SESSIONS * 3);
    for (const [session, seen] of exits) {
      expect([session, seen.size]).toEqual([session, 1]);
      expect(PROXY_IPS).toContain([...seen][0]);
    }
    expect(most).toBeLessThanOrEqual(MAX_LEASES);
    expect(world.gateway.leasesHeld).toBeLessThanOrEqual(SLOTS);
    // Spread, not piled: every proxy carries some of the sessions.
    expect(new Set([...exits.values()].map((s) => [...s][0])).size).toBe(PROXY_IPS.length);
    const shared = (await world.registry.getSingleMetric('proxy_operator_gateway_shared_leases_total')!.get())
      .values;
    expect(shared.reduce((n, v) => n + v.value, 0)).toBeGreaterThanOrEqual(SESSIONS - SLOTS);
    // A shared lease goes once none of its sessions used it for the idle time.
    await until(async () => (await world.store.totals()).activeLeases === 0, 10_000);
    expect(world.gateway.leasesHeld).toBe(0);
  });

  it('a ban on a shared proxy moves every session on it: one 403, then none from that proxy', async () => {
    world = await startWorld({ idleMs: 10_000 }, MAX_LEASES);
    const first = new Map<string, string>();
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_, i) => {
        const answer = await plain(world, `b${i}`);
        expect(answer.status).toBe(200);
        first.set(`b${i}`, answer.body.trim());
      }),
    );
    const bannedIP = PROXY_IPS[0];
    const onBanned = [...first].filter(([, ip]) => ip === bannedIP).map(([s]) => s);
    expect(onBanned.length).toBeGreaterThan(1); // shared by several sessions
    world.site.banned.add(bannedIP);
    const watch = capWatch(world);
    const after: number[] = [];
    for (const session of first.keys()) after.push((await plain(world, session)).status);
    world.site.seen.length = 0;
    const later = new Map<string, Set<string>>();
    for (let round = 0; round < 2; round++)
      for (const session of first.keys()) {
        const answer = await plain(world, session);
        expect(answer.status).toBe(200);
        later.set(session, (later.get(session) ?? new Set()).add(answer.body.trim()));
      }
    // The site answered the banned proxy once (the client sees that 403); every session on it moved.
    expect(after.filter((s) => s === 403)).toHaveLength(1);
    expect(world.site.seen).not.toContain(bannedIP);
    for (const [session, ips] of later) expect([session, ips.size]).toEqual([session, 1]);
    expect(await watch.stop()).toBeLessThanOrEqual(MAX_LEASES);
  });

  it('still says 503 all_busy when the gateway holds no lease of those options to share', async () => {
    world = await startWorld({ idleMs: 3000 }, 1);
    const open = [];
    for (let i = 0; i < PROXY_IPS.length; i++)
      open.push(await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''), true));
    // Same options: shares the least-loaded held lease; another selector has none to share.
    const sharing = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
    expect(sharing.status).toBe(200);
    expect((await world.store.totals()).activeLeases).toBe(PROXY_IPS.length);
    const other = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic('geo-eu'));
    expect(other.status).toBe(503);
    expect(other.headers['x-gateway-error']).toMatch(/^all_busy: .*no lease for these options to share/);
    for (const t of open) t.close!();
  });
});

describe('which held lease a request joins (leastLoaded)', () => {
  const lease = (
    id: string,
    inFlight: number,
    sessions: number,
    flags: Partial<HeldLease> = {},
  ): HeldLease => ({
    leaseID: id,
    upstream: { id: `fleet/${id}`, host: '127.0.0.2', port: 1 },
    request: { owner: 'team-a', selector: {}, target: 'shop.example', ttlSeconds: 60 },
    group: 'g',
    sessions: new Map(Array.from({ length: sessions }, (_, i) => [`s${i}`, { inFlight: 0, idleSince: 0 }])),
    inFlight,
    renewedAt: 0,
    idleSince: 0,
    lost: false,
    retired: false,
    ...flags,
  });
  it.each([
    ['none held', [], undefined],
    ['fewest requests in flight', [lease('a', 2, 1), lease('b', 0, 5), lease('c', 1, 0)], 'b'],
    ['ties: fewest sessions', [lease('a', 1, 3), lease('b', 1, 2)], 'b'],
    ['ties on both: the first', [lease('a', 1, 2), lease('b', 1, 2)], 'a'],
    [
      'never a retired one (its proxy was reported)',
      [lease('a', 0, 0, { retired: true }), lease('b', 3, 3)],
      'b',
    ],
    ['never a lost one (the book forgot it)', [lease('a', 0, 0, { lost: true })], undefined],
  ])('%s', (_name, leases, joined) => {
    expect(leastLoaded(leases)?.leaseID).toBe(joined);
  });
});

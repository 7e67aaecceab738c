// The gateway's lease pool over the real memory lease book, on a clock the test moves: when a
// full book makes requests share held leases, who rides which lease, and when it goes.
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { LeasePool } from '../../gateway/lease-pool.js';
import type { GatewayLeaseRequest } from '../../gateway/ports.js';
import { gatewayBook } from '../../handlers/gateway-book.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

const IDLE = 1000;
let store: MemoryLeaseStore;
let catalog: TestCatalog;
let pool: LeasePool;
let clock: number;

function setUp(proxies: number, maxLeases: number): void {
  catalog = new TestCatalog(
    Array.from({ length: proxies }, (_, i) => proxy(`fleet/p${i}`, { ip: `10.0.0.${i + 1}`, maxLeases })),
  );
  store = new MemoryLeaseStore({
    catalog,
    logger: silentLogger,
    cooldownSeconds: 60,
    maxCooldownSeconds: 600,
  });
  clock = 0;
  pool = new LeasePool(gatewayBook(store, catalog), { idleMs: IDLE, now: () => clock });
}
afterEach(async () => {
  await pool?.close();
  store?.close();
});

const req = (session?: string, target = 'shop.example'): GatewayLeaseRequest => ({
  owner: 'team-a',
  selector: {},
  target,
  ttlSeconds: 60,
  ...(session === undefined ? {} : { session: `gw:${session}@${target}` }),
});

async function take(session?: string, target?: string) {
  const taken = await pool.take(req(session, target));
  if (!taken.granted) throw new Error(`refused: ${taken.reason}`);
  return taken;
}
const give = (lease: Awaited<ReturnType<typeof take>>['lease'], session?: string) =>
  pool.give(lease, session === undefined ? undefined : `gw:${session}@shop.example`);
const booked = async () => (await store.totals()).activeLeases;

describe('sharing when the book is full', () => {
  it('a session the book cannot place joins a held lease; the book holds no more leases', async () => {
    setUp(1, 1);
    const a = await take('a');
    const b = await take('b');
    expect(a.shared).toBeUndefined();
    expect(b.shared).toBe(true);
    expect(b.lease).toBe(a.lease);
    expect(await booked()).toBe(1);
    expect([...a.lease.sessions.keys()]).toEqual(['gw:a@shop.example', 'gw:b@shop.example']);
  });

  it('joins the least-loaded held lease, not the first', async () => {
    setUp(2, 1);
    const a = await take('a');
    const b = await take('b');
    expect(b.lease).not.toBe(a.lease);
    const c = await take('c'); // both carry one request: the fewest sessions, then the first
    const d = await take('d');
    expect(new Set([c.lease, d.lease])).toEqual(new Set([a.lease, b.lease]));
  });

  it('a joined session stays on its lease, even once the book has room again', async () => {
    setUp(1, 1);
    const a = await take('a');
    const b = await take('b');
    give(b.lease, 'b');
    // Another proxy appears: the book has room, but asking it would move b.
    catalog.replaceAll([...catalog.proxies, proxy('fleet/p9', { ip: '10.0.0.9', maxLeases: 1 })]);
    const again = await take('b');
    expect(again.lease).toBe(a.lease);
    expect(again.shared).toBeUndefined();
  });

  it('is released only when none of its sessions used it for the idle time', async () => {
    setUp(1, 1);
    const a = await take('a');
    const b = await take('b');
    give(a.lease, 'a');
    clock = 600;
    give(b.lease, 'b');
    clock = 1100; // a's last use is 1100 ms old, b's 500
    await pool.sweep();
    expect(pool.size).toBe(1);
    clock = 1600;
    await pool.sweep();
    expect(pool.size).toBe(0);
    expect(await booked()).toBe(0);
  });

  it('lets go of a joined session idle for the idle time while others keep the lease busy', async () => {
    setUp(1, 1);
    const a = await take('a');
    const b = await take('b');
    give(b.lease, 'b');
    for (clock = 200; clock <= 1400; clock += 200) {
      give(a.lease, 'a');
      await take('a');
      await pool.sweep();
    }
    expect(pool.size).toBe(1);
    expect(pool.heldFor('team-a', 'gw:b@shop.example')).toEqual([]);
    expect(pool.heldFor('team-a', 'gw:a@shop.example')).toEqual([a.lease]);
  });

  it('a ban on the proxy for the target retires every lease there; its sessions move to another', async () => {
    setUp(2, 1);
    const a = await take('a'); // p0
    const b = await take('b'); // p1
    const c = await take('c'); // the book is full: joins a's lease (a tie, the first)
    expect(c.lease).toBe(a.lease);
    await store.report(a.lease.leaseID, 'banned', { target: 'shop.example' }, 'team-a');
    pool.retireProxy(a.lease.upstream.id, 'shop.example');
    expect(pool.size).toBe(2); // in flight: released when its requests end
    give(a.lease, 'a');
    give(a.lease, 'c');
    expect(pool.size).toBe(1);
    expect(await booked()).toBe(1);
    // p0 rests for the site and p1 is full: both sessions join b's lease, none goes back to p0.
    for (const s of ['a', 'c']) expect((await take(s)).lease).toBe(b.lease);
    expect(await booked()).toBe(1);
  });

  it('a session the book moves off a merely full proxy leaves its lease there to the sessions that joined it', async () => {
    setUp(2, 1);
    const s = await take('s'); // p0, in flight
    const u = await take('u'); // p1
    const t = await take('t'); // full: joins s's lease (a tie, the first)
    expect(t.lease).toBe(s.lease);
    await pool.drop(u.lease); // p1 free again
    const second = await take('s'); // s's lease is busy and p0 full: the book moves s to p1
    expect(second.lease.upstream.id).not.toBe(s.lease.upstream.id);
    expect((await take('t')).lease).toBe(s.lease); // t stays on p0
    expect(pool.heldFor('team-a', 'gw:s@shop.example')).toEqual([second.lease]);
    give(second.lease, 's');
    expect((await take('s')).lease).toBe(second.lease); // s's requests follow it to p1
    // The old lease is t's now: released once t (the last on it) leaves it idle for the idle time.
    for (const who of ['s', 't', 't']) give(s.lease, who);
    clock = IDLE;
    await pool.sweep();
    expect(pool.heldFor('team-a', 'gw:t@shop.example')).toEqual([]);
    expect(pool.size).toBe(1);
  });

  it("shares a grant still on its way: the book is full of the group's own leases whose answers have not arrived", async () => {
    setUp(1, 1);
    // A loaded event loop or a slow Redis: the book counts a's lease at once, its answer comes later.
    const book = gatewayBook(store, catalog);
    await pool.close();
    pool = new LeasePool(
      {
        ...book,
        lease: async (request) => {
          const answer = await book.lease(request);
          if (answer.granted) await new Promise((r) => setTimeout(r, 50));
          return answer;
        },
      },
      { idleMs: IDLE, now: () => clock },
    );
    const [a, b, c] = await Promise.all([take('a'), take('b'), take()]);
    expect([a.shared, b.shared, c.shared]).toEqual([undefined, true, true]);
    expect(b.lease).toBe(a.lease);
    expect(c.lease).toBe(a.lease);
    expect(await booked()).toBe(1);
  });

  it('shares nothing across targets: all_busy stays when nothing of those options is held', async () => {
    setUp(1, 1);
    await take('a');
    expect(await pool.take(req('b', 'news.example'))).toMatchObject({ granted: false, reason: 'all_busy' });
  });
});

describe("the site's pace: which idle lease a request takes (site-paces.ts says which upstream has room)", () => {
  it('without a session: an idle lease whose upstream has a turn now, before one that must wait', async () => {
    setUp(2, 1);
    const first = await take();
    const second = await take();
    give(first.lease);
    give(second.lease);
    const paced = first.lease.upstream.id;
    const taken = await pool.take(req(), (id) => id !== paced);
    expect(taken.granted && taken.lease).toBe(second.lease);
  });

  it('without a session, none with room: a new lease from the book, else the idle one that must wait', async () => {
    setUp(2, 1);
    const first = await take();
    give(first.lease);
    const noRoom = () => false;
    const fresh = await pool.take(req(), noRoom);
    expect(fresh.granted && fresh.lease.upstream.id).not.toBe(first.lease.upstream.id);
    expect(await booked()).toBe(2);
    // The book is full now: the idle lease that must wait goes after all (it waits for its turn).
    const waiting = await pool.take(req(), noRoom);
    expect(waiting.granted && waiting.lease).toBe(first.lease);
  });

  it('a session keeps its own idle lease even when its upstream must wait (its exit stays)', async () => {
    setUp(2, 1);
    const own = await take('s');
    await take();
    give(own.lease, 's');
    const taken = await pool.take(req('s'), () => false);
    expect(taken.granted && taken.lease).toBe(own.lease);
    expect(await booked()).toBe(2);
  });
});

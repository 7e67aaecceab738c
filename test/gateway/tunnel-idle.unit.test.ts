// A tunnel whose client vanished without a FIN (its host gone, a network partition) must not
// hold its sockets and its lease for ever: a tunnel that carries no byte either way for
// --gateway-tunnel-idle-timeout is closed and its lease goes back to the book, and both of its
// sockets keep TCP keep-alive on. A tunnel that carries bytes, however long, is never cut.
// Real parts (gateway-world.ts): real forward proxies, the memory book, a TCP site; the vanished
// client is a socket that stops reading and sending (no FIN, no RST).
import { execFileSync } from 'node:child_process';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { startWorld, tunnelThrough, until, type World } from './gateway-world.js';

const IDLE_MS = 400;

let world: World | undefined;
let site: Server | undefined;
const siteSockets = new Set<Socket>();
// The quiet clients' sockets: one that never reads never sees the gateway's close, and left
// open it kept the whole in-band jest run from exiting.
const clientSockets = new Set<Socket>();
afterEach(async () => {
  for (const s of clientSockets) s.destroy();
  clientSockets.clear();
  await world?.close();
  for (const s of siteSockets) s.destroy();
  siteSockets.clear();
  await new Promise((r) => (site === undefined ? r(undefined) : site.close(r)));
  world = site = undefined;
});

type SiteKind =
  /** Reads what comes, sends nothing. */
  | 'silent'
  /** Sends 32 MiB at once (more than every buffer on the way holds). */
  | 'flood'
  /** Sends 8 KiB every 50 ms for `ms`, then closes. */
  | { trickle: number };

const CHUNK = 8 * 1024;

async function startSite(kind: SiteKind): Promise<{ port: number; received: () => number }> {
  let received = 0;
  site = createServer((s) => {
    siteSockets.add(s);
    s.on('error', () => undefined);
    s.on('data', (c: Buffer) => (received += c.length));
    if (kind === 'flood') s.write(Buffer.alloc(32 * 1024 * 1024, 1));
    else if (kind !== 'silent') {
      const timer = setInterval(() => s.write(Buffer.alloc(CHUNK, 2)), 50);
      setTimeout(() => {
        clearInterval(timer);
        s.end();
      }, kind.trickle);
      s.once('close', () => clearInterval(timer));
    }
  });
  await new Promise<void>((r) => site!.listen(0, '127.0.0.1', r));
  return { port: (site.address() as AddressInfo).port, received: () => received };
}

/**
 * How long the gateway kept its tunnel open from now, or Infinity past `capMs`. Measured on the
 * gateway's side: a client that reads nothing never learns of the close (that is the point).
 */
async function tunnelOpenFor(w: World, capMs: number): Promise<number> {
  const started = Date.now();
  while (w.gateway.openTunnels > 0) {
    if (Date.now() - started > capMs) return Infinity;
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - started;
}

describe('a tunnel whose client went quiet without closing is closed after the idle timeout', () => {
  it.each<[string, SiteKind, (s: Socket) => Promise<void>]>([
    ['an idle tunnel: the client sends and reads nothing', 'silent', async () => undefined],
    [
      'a client that stops reading in the middle of a download (its buffers fill, then nothing moves)',
      'flood',
      async (s) => {
        s.resume();
        await new Promise((r) => s.once('data', r));
        s.pause();
      },
    ],
    [
      'a client that sent a request, then vanished',
      'silent',
      async (s) => void s.write('GET / HTTP/1.1\r\nHost: site\r\n\r\n'),
    ],
  ])('%s: closed, and the lease back in the book', async (_name, kind, behave) => {
    world = await startWorld({ tunnelIdleMs: IDLE_MS, idleMs: 200 });
    const { port } = await startSite(kind);
    const s = await tunnelThrough(world, port);
    clientSockets.add(s);
    s.on('error', () => undefined);
    await behave(s);
    expect((await world.store.totals()).activeLeases).toBe(1);
    // No FIN, no RST: the socket stays open on the client's side; only the gateway can end it.
    const openMs = await tunnelOpenFor(world, 5000);
    expect(openMs).toBeGreaterThanOrEqual(IDLE_MS - 100);
    expect(openMs).toBeLessThan(IDLE_MS + 2000);
    await until(async () => (await world!.store.totals()).activeLeases === 0);
    expect(world.gateway.leasesHeld).toBe(0);
    const ended = await world.registry.getSingleMetric('proxy_operator_gateway_tunnels_total')!.get();
    expect(ended.values.find((v) => v.labels.outcome === 'idle')?.value).toBe(1);
  });
});

describe('a tunnel that carries bytes is never cut, however long it lasts', () => {
  it('a download trickling 8 KiB every 50 ms for 6 idle timeouts arrives whole', async () => {
    world = await startWorld({ tunnelIdleMs: IDLE_MS });
    const lasting = 6 * IDLE_MS;
    const { port } = await startSite({ trickle: lasting });
    const s = await tunnelThrough(world, port);
    clientSockets.add(s);
    let got = 0;
    s.on('data', (c: Buffer) => (got += c.length));
    s.resume();
    const started = Date.now();
    await new Promise((r) => s.once('end', r));
    expect(Date.now() - started).toBeGreaterThanOrEqual(lasting - 50);
    // Every chunk the site sent for the whole time, not a download cut short.
    expect(got).toBeGreaterThanOrEqual(CHUNK * Math.floor((lasting - 200) / 50));
    s.destroy();
  });

  it('an upload sending 8 KiB every 50 ms for 6 idle timeouts (nothing comes back) arrives whole', async () => {
    world = await startWorld({ tunnelIdleMs: IDLE_MS });
    const { port, received } = await startSite('silent');
    const s = await tunnelThrough(world, port);
    clientSockets.add(s);
    let sent = 0;
    for (const started = Date.now(); Date.now() - started < 6 * IDLE_MS;) {
      s.write(Buffer.alloc(CHUNK, 3));
      sent += CHUNK;
      await new Promise((r) => setTimeout(r, 50));
    }
    await until(() => received() === sent);
    expect(s.destroyed).toBe(false);
    expect(world.gateway.openTunnels).toBe(1);
    s.destroy();
  });

  it('a tunnel quiet for most of the timeout, then used, then quiet again, stays open while used', async () => {
    world = await startWorld({ tunnelIdleMs: IDLE_MS });
    const { port, received } = await startSite('silent');
    const s = await tunnelThrough(world, port);
    clientSockets.add(s);
    // Quiet counted from each write, the tunnel's last activity: the wait for the byte to
    // arrive is part of the quiet, so a slow poll under load cannot stretch it past the timeout.
    let wrote = Date.now();
    for (let i = 1; i <= 4; i++) {
      await new Promise((r) => setTimeout(r, Math.max(0, wrote + IDLE_MS * 0.6 - Date.now())));
      wrote = Date.now();
      s.write('x');
      await until(() => received() === i);
    }
    expect(world.gateway.openTunnels).toBe(1);
    s.destroy();
  });
});

/** The keep-alive timer of each established socket `ss` lists for a filter ('' when it has none). */
function keepAliveTimers(filter: string): string[] {
  const out = execFileSync('ss', ['-tnoH', 'state', 'established', filter], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => /timer:\((keepalive)[^)]*\)/.exec(l)?.[1] ?? '');
}

describe("both of a tunnel's sockets keep TCP keep-alive on", () => {
  it("the gateway's socket towards the client and towards the upstream proxy", async () => {
    world = await startWorld({ tunnelIdleMs: 60_000 });
    const { port } = await startSite('silent');
    const s = await tunnelThrough(world, port);
    clientSockets.add(s);
    const proxyPorts = [...world.proxies.values()].map((p) => p.port);
    // The gateway accepted the client's connection on its port; it dialled a proxy's port.
    const towardsClient = keepAliveTimers(`( sport = :${world.port} )`);
    const towardsUpstream = keepAliveTimers(`( ${proxyPorts.map((p) => `dport = :${p}`).join(' or ')} )`);
    expect({ towardsClient, towardsUpstream }).toEqual({
      towardsClient: ['keepalive'],
      towardsUpstream: ['keepalive'],
    });
    s.destroy();
  });
});

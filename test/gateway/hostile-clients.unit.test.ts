// Clients that misbehave at the socket level: none may crash the gateway (one process with
// the whole operator in the all-in-one deployment) or hold a connection open unauthenticated.
import { createServer as createHttpServer, type Server } from 'node:http';
import {
  connect,
  createServer as createNetServer,
  type AddressInfo,
  type Server as NetServer,
  type Socket,
} from 'node:net';
import { basic, startWorld, until, viaGateway, viaTunnel, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

/** A raw connection to the gateway, open. */
function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('a refused CONNECT whose client resets the connection', () => {
  it.each<[string, string]>([
    ['a wrong token', `Proxy-Authorization: ${basic('session-a', 'WRONG-token-0123456789')}\r\n`],
    ['no credentials', ''],
    ['an invalid username', `Proxy-Authorization: ${basic('sesion-a')}\r\n`],
  ])('%s: the gateway lives on and serves the next request', async (_n, auth) => {
    world = await startWorld();
    for (const resetWhen of ['at once', 'after the answer'] as const) {
      const socket = await dial(world.port);
      socket.on('error', () => undefined);
      socket.write(`CONNECT 127.0.0.1:${world.site.httpsPort} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`);
      if (resetWhen === 'after the answer') await new Promise((r) => socket.once('data', r));
      // curl closes without reading the 407's body: an RST, not a FIN.
      socket.resetAndDestroy();
      await new Promise((r) => setTimeout(r, 50));
    }
    const next = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
    expect(next.status).toBe(200);
    expect((await viaGateway(world.port, `http://127.0.0.1:${world.site.httpPort}/`, basic(''))).status).toBe(
      200,
    );
  });

  it('a CONNECT without host:port, reset: the same', async () => {
    world = await startWorld();
    const socket = await dial(world.port);
    socket.on('error', () => undefined);
    socket.write(`CONNECT nohost HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic('')}\r\n\r\n`);
    socket.resetAndDestroy();
    await new Promise((r) => setTimeout(r, 50));
    expect((await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''))).status).toBe(200);
  });
});

/** Resolves with how long `socket` stayed open (it is closed by the other side, or `capMs` passes). */
function closedWithin(socket: Socket, capMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(Infinity), capMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - started);
    });
  });
}

describe('a client that holds a connection without a whole request head (slowloris)', () => {
  it.each<[string, (s: Socket) => () => void]>([
    ['sends nothing', () => () => undefined],
    [
      'dribbles a header byte every 100 ms',
      (s) => {
        s.write('GET http://127.0.0.1/ HTTP/1.1\r\nX-A: ');
        const t = setInterval(() => s.write('a'), 100);
        return () => clearInterval(t);
      },
    ],
  ])('%s: closed after the headers timeout', async (_n, behave) => {
    world = await startWorld({ headersTimeoutMs: 400 });
    const socket = await dial(world.port);
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    const stop = behave(socket);
    const openMs = await closedWithin(socket, 3000);
    stop();
    socket.destroy();
    expect(openMs).toBeGreaterThanOrEqual(350);
    expect(openMs).toBeLessThan(1500);
  });

  it('a tunnel and a keep-alive connection outlive the headers timeout', async () => {
    world = await startWorld({ headersTimeoutMs: 300 });
    const tunnel = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''), true);
    expect(tunnel.status).toBe(200);
    // A keep-alive connection idle between requests is bounded by the keep-alive timeout (60 s).
    const socket = await dial(world.port);
    const ask = () =>
      new Promise<string>((resolve) => {
        let got = '';
        const onData = (c: Buffer) => {
          got += c.toString('latin1');
          if (/\r\n\r\n[\d.]+\n$/.test(got)) {
            socket.off('data', onData);
            resolve(got);
          }
        };
        socket.on('data', onData);
        socket.write(
          `GET http://127.0.0.1:${world.site.httpPort}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: ${basic('')}\r\n\r\n`,
        );
      });
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 /);
    await new Promise((r) => setTimeout(r, 1000));
    expect(socket.destroyed).toBe(false);
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 /);
    socket.destroy();
    expect(world.gateway.openTunnels).toBe(1);
    tunnel.close!();
  });
});

/** What the gateway wrote on a raw connection before closing it. */
async function answerTo(port: number, raw: string): Promise<string> {
  const socket = await dial(port);
  socket.on('error', () => undefined);
  let got = '';
  socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
  socket.write(raw);
  await closedWithin(socket, 3000);
  socket.destroy();
  return got;
}

describe("a request Node's parser refuses gets the documented answer", () => {
  it.each<[string, number, string, () => string]>([
    [
      'a head over the limit',
      431,
      'headers_too_large',
      () => `GET http://127.0.0.1/ HTTP/1.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ],
    ['not HTTP', 400, 'invalid_request', () => 'HELLO THERE\r\n\r\n'],
    ['no head in time', 408, 'request_timeout', () => ''],
  ])('%s: %d with the JSON body and X-Gateway-Error', async (_n, status, code, raw) => {
    world = await startWorld({ headersTimeoutMs: 300 });
    const answer = await answerTo(world.port, raw());
    expect(answer.slice(0, 12)).toBe(`HTTP/1.1 ${status}`);
    expect(answer).toMatch(new RegExp(`\r\nX-Gateway-Error: ${code}: `));
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: code });
  });
});

/**
 * Pipelining (RFC 9112 §9.3.2): a server answers in the order the requests came. A CONNECT
 * pipelined behind a plain request is served once the answers before it are sent; its
 * `200 Connection established` and the tunnel's bytes never come before, or inside, them.
 */
describe('a CONNECT pipelined behind a plain GET on one connection', () => {
  const BANNER = 'BANNER-FROM-THE-TUNNEL\n';
  let slowSite: Server | undefined;
  let bannerSite: NetServer | undefined;
  afterEach(async () => {
    slowSite?.closeAllConnections();
    for (const s of [slowSite, bannerSite]) await new Promise((r) => (s ? s.close(r) : r(undefined)));
    slowSite = bannerSite = undefined;
  });

  /** A site answering 64 KiB after 300 ms, and a server-first TCP site (a banner, then echo). */
  async function sites(): Promise<{ slow: number; banner: number; body: string }> {
    const body = 'b'.repeat(64 * 1024);
    slowSite = createHttpServer((_req, res) => {
      setTimeout(() => res.writeHead(200, { 'content-length': String(body.length) }).end(body), 300);
    });
    bannerSite = createNetServer((s) => {
      s.on('error', () => undefined);
      s.write(BANNER);
      s.pipe(s);
    });
    for (const s of [slowSite, bannerSite]) await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    return {
      slow: (slowSite.address() as AddressInfo).port,
      banner: (bannerSite.address() as AddressInfo).port,
      body,
    };
  }

  const get = (port: number, connection: string) =>
    `GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Authorization: ${basic('')}\r\nConnection: ${connection}\r\n\r\n`;
  const connectTo = (port: number) =>
    `CONNECT 127.0.0.1:${port} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nProxy-Authorization: ${basic('')}\r\n\r\n`;

  it("answers the GET whole, then the CONNECT, then the tunnel's bytes, in that order", async () => {
    world = await startWorld({ idleMs: 200 });
    const { slow, banner, body } = await sites();
    const socket = await dial(world.port);
    let got = '';
    socket.on('data', (c: Buffer) => (got += c.toString('latin1')));
    // One write: the gateway reads both heads at once, the GET's answer still to come.
    socket.write(get(slow, 'keep-alive') + connectTo(banner));
    await until(() => got.includes(BANNER), 5000);
    socket.write('echo me\n');
    await until(() => got.endsWith('echo me\n'), 5000);
    const getEnd = got.indexOf('\r\n\r\n') + 4 + body.length;
    expect(got.slice(0, 15)).toBe('HTTP/1.1 200 OK');
    expect(got.slice(getEnd - body.length, getEnd)).toBe(body);
    expect(got.slice(getEnd)).toBe(`HTTP/1.1 200 Connection established\r\n\r\n${BANNER}echo me\n`);
    socket.destroy();
  });

  it('a GET that asks to close the connection: its answer whole, then the close; no error inside it, no tunnel', async () => {
    world = await startWorld({ idleMs: 200 });
    const { slow, banner, body } = await sites();
    // Node's parser refuses bytes after a `Connection: close` request: the gateway's 400 for
    // them was written before the GET's answer, which it then cut.
    const answer = await answerTo(world.port, get(slow, 'close') + connectTo(banner));
    expect(answer.slice(0, 15)).toBe('HTTP/1.1 200 OK');
    expect(answer.endsWith(body)).toBe(true);
    expect([...world.proxies.values()].reduce((n, p) => n + p.stats.connects, 0)).toBe(0);
    await until(async () => (await world.store.totals()).activeLeases === 0);
  });
});

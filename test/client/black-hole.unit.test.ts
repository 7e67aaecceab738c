// A proxy that accepts nothing and answers nothing (issue 47 item 7): a request through it
// times out before its connection to the proxy completes, and the integration counts that as
// the proxy's failure (`unreachable`), unlike a timeout after the connection (a slow site).
// Real parts: a listening socket that never accepts, its backlog filled so that further SYNs
// are dropped, and got-scraping (Crawlee's HTTP client) through it.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { gotScraping } from 'got-scraping';
import { isProxyFailure } from '../../client/src/crawlee/index.js';
import { eventually } from '../book/fixtures.js';

async function failureOf(request: Promise<unknown>): Promise<unknown> {
  try {
    await request;
  } catch (err) {
    return err;
  }
  throw new Error('the request did not fail');
}

describe('a black-holed proxy', () => {
  let hole: ChildProcess;
  let port: number;
  const idle: Socket[] = [];
  let slowSite: Server;
  let slowPort: number;
  const held: Socket[] = [];

  beforeAll(async () => {
    // A socket that listens and never accepts (Node accepts every connection itself).
    hole = spawn('python3', [
      '-c',
      'import socket,sys,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\ns.listen(0)\n' +
        'print(s.getsockname()[1],flush=True)\ntime.sleep(600)',
    ]);
    port = await new Promise<number>((resolve) =>
      hole.stdout!.once('data', (d: Buffer) => resolve(Number(d))),
    );
    // Fill its accept queue: the kernel drops the SYNs after these.
    // (A backlog of 0 completes one or two handshakes; the SYNs of the rest are dropped.)
    for (let i = 0; i < 3; i++) idle.push(connect(port, '127.0.0.1').on('error', () => undefined));
    await eventually(() => idle.some((s) => !s.connecting), 30_000);
    await new Promise((r) => setTimeout(r, 200));
    // A site (reached through no proxy) that accepts and never answers: a slow site.
    slowSite = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => slowSite.listen(0, '127.0.0.1', resolve));
    slowPort = (slowSite.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const s of idle) s.destroy();
    hole.kill();
    for (const s of held) s.destroy();
    await new Promise((resolve) => slowSite.close(resolve));
  });

  it('a timeout connecting to it is the proxy failing', async () => {
    const err = await failureOf(
      gotScraping({
        url: 'http://127.0.0.1:9/page',
        proxyUrl: `http://127.0.0.1:${port}`,
        timeout: { request: 1_500 },
        retry: { limit: 0 },
      }),
    );
    expect((err as { code?: string }).code).toBe('ETIMEDOUT');
    expect(isProxyFailure(err)).toBe(true);
    // Crawlee may wrap it: the cause still says so.
    expect(isProxyFailure(new Error('request failed', { cause: err }))).toBe(true);
  });

  it('a timeout after the connection (a site that never answers) is not', async () => {
    const err = await failureOf(
      gotScraping({
        url: `http://127.0.0.1:${slowPort}/page`,
        timeout: { request: 1_000 },
        retry: { limit: 0 },
      }),
    );
    expect((err as { code?: string }).code).toBe('ETIMEDOUT');
    expect(isProxyFailure(err)).toBe(false);
  });
});

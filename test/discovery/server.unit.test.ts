// The HTTP server's protections: slow or idle clients are cut off, shutdown is graceful.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { DiscoveryServer } from '../../discovery/server.js';
import { eventually, silentLogger } from '../book/fixtures.js';

const hello = (_req: IncomingMessage, res: ServerResponse) => res.end('hello');

function openSocket(
  port: number,
): Promise<{ socket: Socket; closed: () => boolean; received: () => string }> {
  return new Promise((resolve, reject) => {
    let closed = false;
    let received = '';
    const socket = connect(port, '127.0.0.1', () =>
      resolve({ socket, closed: () => closed, received: () => received }),
    );
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', reject);
  });
}

describe('DiscoveryServer', () => {
  let server: DiscoveryServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function start(listener: RequestListener = hello, options = {}) {
    server = new DiscoveryServer(listener, { host: '127.0.0.1', port: 0, ...options }, silentLogger);
    await server.start();
    return server;
  }

  it('serves on the bound loopback port', async () => {
    const s = await start();
    expect(s.url).toBe(`http://127.0.0.1:${s.port}`);
    const response = await request(`${s.url}/`);
    expect(await response.body.text()).toBe('hello');
  });

  it.each([
    ['headers that never finish (slowloris)', 'GET / HTTP/1.1\r\nHost: x\r\n'],
    ['a body that never finishes', 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789'],
  ])('closes a connection sending %s', async (_case, partial) => {
    const s = await start((req, res) => req.resume().on('end', () => res.end('late')), {
      headersTimeoutMs: 300,
      requestTimeoutMs: 600,
    });
    const client = await openSocket(s.port);
    client.socket.write(partial);
    await eventually(client.closed);
    expect(client.received()).not.toContain('late');
  });

  it('closes idle keep-alive connections', async () => {
    const s = await start(hello, { keepAliveTimeoutMs: 200 });
    const client = await openSocket(s.port);
    client.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await eventually(() => client.received().includes('hello'));
    await eventually(client.closed);
  });

  it('lets an in-flight request finish on stop, and refuses new connections afterwards', async () => {
    let finish: (() => void) | undefined;
    const s = await start((_req, res) => {
      finish = () => res.end('finished');
    });
    const url = s.url;
    const inFlight = request(`${url}/`).then((response) => response.body.text());
    await eventually(() => finish !== undefined);
    const stopped = s.stop();
    finish!();
    expect(await inFlight).toBe('finished');
    await stopped;
    server = undefined;
    await expect(request(`${url}/`)).rejects.toThrow();
  });

  it('cuts requests still running when the shutdown grace period ends', async () => {
    let arrived = false;
    const s = await start(
      () => {
        arrived = true;
      },
      { shutdownGraceMs: 200 },
    );
    const hanging = request(`${s.url}/`);
    await eventually(() => arrived);
    await s.stop();
    server = undefined;
    await expect(hanging).rejects.toThrow();
  });

  it('fails to start with the OS error when the port is taken', async () => {
    const s = await start();
    const second = new DiscoveryServer(hello, { host: '127.0.0.1', port: s.port }, silentLogger);
    await expect(second.start()).rejects.toThrow(/EADDRINUSE/);
  });

  it('stop is harmless before start and when repeated', async () => {
    const s = new DiscoveryServer(hello, { host: '127.0.0.1', port: 0 }, silentLogger);
    await s.stop();
    await s.start();
    await s.stop();
    await s.stop();
  });

  it('rejects a headers timeout longer than the request timeout', () => {
    expect(
      () =>
        new DiscoveryServer(
          hello,
          { host: '127.0.0.1', port: 0, headersTimeoutMs: 2000, requestTimeoutMs: 1000 },
          silentLogger,
        ),
    ).toThrow(/headersTimeoutMs \(2000\) must not exceed requestTimeoutMs \(1000\)/);
  });
});

// Each mock forward proxy connects out from its own loopback address, so a target sees one
// client address per proxy, as it would see one per VM (what lets a site refuse one proxy).
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startForwardProxy, type ForwardProxy } from '../../../providers/mock/forward-proxy.js';
import { getViaProxy } from './local-servers.js';

/** GET http://<host>:<port>/ through a CONNECT tunnel (plain HTTP inside). */
function getViaConnect(proxy: ForwardProxy, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: proxy.host,
      port: proxy.port,
      method: 'CONNECT',
      path: `${host}:${port}`,
      agent: false,
    });
    req.on('error', reject);
    req.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT answered ${res.statusCode}`));
      // Raw HTTP over the tunnel: what arrives is exactly what the target wrote back.
      let raw = '';
      socket.on('data', (c: Buffer) => (raw += c.toString()));
      socket.on('end', () => resolve(raw.slice(raw.indexOf('\r\n\r\n') + 4)));
      socket.on('error', reject);
      socket.write(`GET / HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: close\r\n\r\n`);
    });
    req.end();
  });
}

describe('mock forward proxies connect out from their own address', () => {
  let target: Server;
  let port: number;
  const proxies: ForwardProxy[] = [];

  beforeAll(async () => {
    // Answers with the client address it sees.
    target = createServer((req, res) => res.end(req.socket.remoteAddress));
    await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
    port = (target.address() as AddressInfo).port;
    for (const host of ['127.0.0.31', '127.0.0.32']) proxies.push(await startForwardProxy({ host, port: 0 }));
  });
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    target.closeAllConnections();
    await new Promise((resolve) => target.close(resolve));
  });

  it.each([
    { via: 0, how: 'absolute URI', targetHost: '127.0.0.1', seen: '127.0.0.31' },
    { via: 1, how: 'absolute URI', targetHost: '127.0.0.1', seen: '127.0.0.32' },
    { via: 1, how: 'absolute URI', targetHost: 'localhost', seen: '127.0.0.32' },
    { via: 0, how: 'CONNECT', targetHost: '127.0.0.1', seen: '127.0.0.31' },
    { via: 1, how: 'CONNECT', targetHost: 'localhost', seen: '127.0.0.32' },
  ])('proxy $via by $how to $targetHost: the target sees $seen', async ({ via, how, targetHost, seen }) => {
    const proxy = proxies[via];
    const body =
      how === 'CONNECT'
        ? await getViaConnect(proxy, targetHost, port)
        : (await getViaProxy(proxy, `http://${targetHost}:${port}/`)).body;
    expect(body).toBe(seen);
  });
});

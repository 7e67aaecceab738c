// The integration's calls to the discovery API ride on kept-alive connections: a crawl makes a
// lease, a report, a release and a session's end per Crawlee session, and a connection opened
// and closed per call would cost the crawling process a connect, a close and their objects
// each (issue 45 asked whether the integration's extra CPU per page was sockets). Counted
// through Node's `net` diagnostics channel: every client socket this process opens to the API.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';
import { Request } from '@crawlee/core';
import { DiscoveryClient } from '../../client/src/index.js';
import { ProxyOperatorConfiguration } from '../../client/src/crawlee/index.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

const PROXIES = [1, 2, 3].map((i) => proxy(`ns/p${i}`, { ip: `10.0.0.${i}` }));
const SESSIONS = 20;

/** Sockets this process connects to `port` while `work` runs. */
async function connectionsTo(port: number, work: () => Promise<void>): Promise<number> {
  let opened = 0;
  const onSocket = (message: unknown) => {
    const { socket } = message as { socket: Socket };
    socket.once('connect', () => {
      if (socket.remotePort === port) opened++;
    });
  };
  subscribe('net.client.socket', onSocket);
  try {
    await work();
  } finally {
    unsubscribe('net.client.socket', onSocket);
  }
  return opened;
}

describe("the integration's calls to the discovery API", () => {
  let server: TestDiscoveryServer;

  beforeEach(async () => {
    server = await startDiscoveryServer({ proxies: PROXIES });
  });
  afterEach(async () => {
    await server.stop();
  });

  it('reuse kept-alive connections: a session after another, each leasing, reporting and ending, opens one', async () => {
    const config = new ProxyOperatorConfiguration({
      client: new DiscoveryClient({ baseUrl: server.baseUrl }),
      okReportIntervalMs: 0, // an ok report per success: the most calls a crawl makes
      leaseAhead: false,
      log: { debug: () => undefined, warning: () => undefined },
    });
    const port = Number(new URL(server.baseUrl).port);
    const before = server.requests.length;
    const opened = await connectionsTo(port, async () => {
      for (let i = 0; i < SESSIONS; i++) {
        const session = `session_${i}`;
        const url = `https://shop.example/${i}`;
        const info = await config.newProxyInfo(session, { request: new Request({ url }) });
        await config.postNavigationHook({
          request: { url },
          session: { id: session },
          proxyInfo: info,
          response: { statusCode: 200 },
        });
        await config.leases.sessionEnded(session);
      }
      await config.close();
    });
    const calls = server.requests.length - before;
    // A lease, a report or a release, and a session's end per session: about 3 calls each.
    expect(calls).toBeGreaterThanOrEqual(2 * SESSIONS);
    // Calls one after another need one connection; allow one more for a socket the server
    // closed between two calls. A connection per call would be `calls`.
    expect(opened).toBeLessThanOrEqual(2);
  });
});

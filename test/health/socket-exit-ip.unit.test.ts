import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { SocketProber } from '../../health/socket-prober.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { makeSelfSignedCert } from './targets.js';

// Real sockets on loopback: the mock provider's forward proxy on 127.0.0.2 connects out from
// its own address, so an echo server sees 127.0.0.2, not 127.0.0.1.
describe('SocketProber.readExitIP reads the echo through the proxy', () => {
  const cert = makeSelfSignedCert();
  let proxy: ForwardProxy;
  let prober: SocketProber;
  const servers: Array<http.Server | https.Server> = [];
  let httpBase: string;
  let httpsBase: string;

  const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const caller = req.socket.remoteAddress ?? '';
    if (req.url === '/ip') res.writeHead(200).end(`${caller}\n`);
    else if (req.url === '/json')
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ip: caller }));
    else if (req.url === '/big') res.writeHead(200).end('x'.repeat(1024 * 1024));
    else if (req.url === '/sentence') res.writeHead(200).end('your address is secret');
    else res.writeHead(404).end('not found');
  };

  async function listen(server: http.Server | https.Server): Promise<number> {
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as AddressInfo).port;
  }

  beforeAll(async () => {
    proxy = await startForwardProxy({ host: '127.0.0.2', port: await freePort() });
    prober = new SocketProber({ tls: { ca: cert.cert } });
    httpBase = `http://127.0.0.1:${await listen(http.createServer(handler))}`;
    httpsBase = `https://127.0.0.1:${await listen(https.createServer({ key: cert.key, cert: cert.cert }, handler))}`;
  });

  afterAll(async () => {
    await prober.close();
    await proxy.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  });

  const target = (exitIPURL: string, port = proxy.port): ProbeTarget => ({
    key: 'ns/p',
    host: '127.0.0.2',
    port,
    probeURL: `${httpBase}/generate_204`,
    exitIPURL,
    intervalSeconds: 10,
    timeoutSeconds: 2,
    failureThreshold: 1,
    successThreshold: 1,
    expectedStatusCodes: [204],
  });

  it.each([
    ['plain text over http', () => `${httpBase}/ip`],
    ['JSON over http', () => `${httpBase}/json`],
    ['plain text through a CONNECT tunnel (https)', () => `${httpsBase}/ip`],
    ['JSON through a CONNECT tunnel (https)', () => `${httpsBase}/json`],
  ])('%s: the proxy’s own address', async (_what, url) => {
    expect(await prober.readExitIP(target(url()), new AbortController().signal)).toEqual({
      ok: true,
      ip: '127.0.0.2',
    });
    expect(prober.probesInFlight).toBe(0);
  });

  it.each([
    ['a 404', '/nope', 'UnexpectedStatus'],
    ['a sentence', '/sentence', 'NotAnIP'],
    ['a megabyte (read only in part)', '/big', 'NotAnIP'],
  ])('%s tells nothing: %s', async (_what, path, reason) => {
    const reading = await prober.readExitIP(target(`${httpBase}${path}`), new AbortController().signal);
    expect(reading).toMatchObject({ ok: false, reason });
    expect(prober.probesInFlight).toBe(0);
  });

  it('a proxy that is gone is a RequestFailed, resolved, not thrown', async () => {
    const reading = await prober.readExitIP(
      target(`${httpBase}/ip`, await freePort()),
      new AbortController().signal,
    );
    expect(reading).toMatchObject({ ok: false, reason: 'RequestFailed' });
  });
});

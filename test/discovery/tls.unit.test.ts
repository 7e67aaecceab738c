// The discovery API over TLS (issue 44 item 5): given a certificate the server speaks only
// HTTPS, and the TypeScript client reaches it with the CA option; without the CA it refuses
// the certificate. Real sockets on loopback, a throw-away certificate made by openssl.
import { Registry } from 'prom-client';
import { connect } from 'node:net';
import { DiscoveryClient } from '../../client/src/index.js';
import { ApiTokens } from '../../book/api-tokens.js';
import { createDiscoveryApp } from '../../discovery/app.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { DiscoveryServer } from '../../discovery/server.js';
import { selfSignedCert } from '../../framework/testing/self-signed-cert.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

const TOKEN = 'tls-test-token-0123456789';

describe('the discovery API over TLS', () => {
  const cert = selfSignedCert();
  let server: DiscoveryServer;
  beforeAll(async () => {
    const catalog = new TestCatalog([
      proxy('ns/a', { maxLeases: 2, credentials: { username: 'u', password: 'p' } }),
    ]);
    const leases = new MemoryLeaseStore({ catalog, logger: silentLogger });
    const app = createDiscoveryApp({
      catalog,
      leases,
      tokens: ApiTokens.single(TOKEN),
      logger: silentLogger,
      registry: new Registry(),
    });
    server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0, tls: cert }, silentLogger);
    await server.start();
  });
  afterAll(() => server.stop());

  it('serves https; the client with the CA leases, credentials and no-store included', async () => {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const client = new DiscoveryClient({ baseUrl: server.url, token: TOKEN, ca: cert.cert });
    const lease = await client.lease({ ttlSeconds: 60 });
    expect(lease.proxy.id).toBe('ns/a');
    expect(lease.proxy).toMatchObject({ username: 'u', password: 'p' });
  });

  it('a client without the CA refuses the certificate', async () => {
    const client = new DiscoveryClient({ baseUrl: server.url, token: TOKEN, timeoutMs: 5000 });
    await expect(client.listProxies()).rejects.toThrow(/certificate/i);
  });

  it('plain HTTP on the port gets no answer in clear', async () => {
    const reply = await new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(server.url).port), '127.0.0.1', () => {
        socket.write('GET /v1/proxies HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      let data = '';
      socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
    });
    expect(reply).not.toContain('"items"');
  });

  it.each([
    [{ ca: 'x', dispatcher: {} }, /ca and dispatcher are exclusive/],
    [{ ca: 'x', baseUrl: 'http://127.0.0.1:1' }, /ca is for an https baseUrl/],
  ])('the client refuses %j', (options, message) => {
    expect(
      () => new DiscoveryClient({ baseUrl: 'https://127.0.0.1:1', ...(options as object) } as never),
    ).toThrow(message);
  });
});

import { connect } from 'node:net';
import { pino } from 'pino';
import { MOCK_DEFAULTS } from '../../../providers/mock/config.js';
import { LoopbackAddresses } from '../../../providers/mock/loopback-addresses.js';
import { MockProvider } from '../../../providers/mock/mock-provider.js';
import { getViaProxy, getViaTunnel, selfSignedCert, startTarget, type Target } from './local-servers.js';

const logger = pino({ level: 'silent' });

function refuses(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, host);
    s.on('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.on('error', () => resolve(true));
  });
}

describe('the mock provider with serveTraffic', () => {
  let http: Target;
  let https: Target;
  const tls = selfSignedCert();
  const now = { ms: 0 };
  // A distinct address block per suite, so parallel test files do not meet on one port.
  const provider = new MockProvider(
    'mock',
    { ...MOCK_DEFAULTS, serveTraffic: true, faults: {} },
    logger,
    new LoopbackAddresses('127.0.77.10'),
    { now: () => now.ms },
  );

  beforeAll(async () => {
    [http, https] = await Promise.all([startTarget('http'), startTarget('https', tls)]);
  });
  afterAll(async () => {
    await provider.close();
    await Promise.all([http.close(), https.close()]);
  });

  it('gives each Running instance its own loopback address with a real proxy on the requested port', async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const a = await provider.create({
      uid: 'a',
      proxy: 'ns/a',
      namespace: 'ns',
      owner: 'test-owner',
      port,
      placement: {},
    });
    const b = await provider.create({
      uid: 'b',
      proxy: 'ns/b',
      namespace: 'ns',
      owner: 'test-owner',
      port,
      placement: {},
    });
    expect((await provider.get(a)).ip).toBe('');
    now.ms += MOCK_DEFAULTS.provisioningSeconds * 1000;

    const [ia, ib] = await Promise.all([provider.get(a), provider.get(b)]);
    expect([ia.state, ib.state]).toEqual(['Running', 'Running']);
    expect(ia.ip).toMatch(/^127\./);
    expect(ib.ip).toMatch(/^127\./);
    expect(ia.ip).not.toBe(ib.ip);
    // Concurrent looks at one instance start one proxy: the address is stable.
    expect((await Promise.all([provider.get(a), provider.get(a)])).map((i) => i.ip)).toEqual([ia.ip, ia.ip]);

    expect(await getViaProxy({ host: ia.ip, port }, `http://127.0.0.1:${http.port}/x`)).toEqual({
      status: 200,
      body: 'http GET /x',
    });
    expect(await getViaTunnel({ host: ib.ip, port }, https.port, '/y', tls.cert)).toEqual({
      status: 200,
      body: 'https GET /y',
    });

    await provider.delete(a);
    expect(await refuses(ia.ip, port)).toBe(true);
    // The other instance keeps serving.
    expect((await getViaProxy({ host: ib.ip, port }, `http://127.0.0.1:${http.port}/z`)).status).toBe(200);
    await provider.delete(b);
    expect(await refuses(ib.ip, port)).toBe(true);
  });

  it('serves the proxy of an instance created with credentials only to clients that send them (407 otherwise)', async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const id = await provider.create({
      uid: 'with-credentials',
      proxy: 'ns/c',
      namespace: 'ns',
      owner: 'test-owner',
      port,
      placement: {},
      credentials: { username: 'proxy-ns-c', password: 'generated-secret' },
    });
    now.ms += MOCK_DEFAULTS.provisioningSeconds * 1000;
    const { ip } = await provider.get(id);
    const url = `http://127.0.0.1:${http.port}/auth`;
    const authorization = `Basic ${Buffer.from('proxy-ns-c:generated-secret').toString('base64')}`;
    expect((await getViaProxy({ host: ip, port }, url)).status).toBe(407);
    expect(await getViaProxy({ host: ip, port }, url, { 'proxy-authorization': authorization })).toEqual({
      status: 200,
      body: 'http GET /auth',
    });
    await provider.delete(id);
  });
});

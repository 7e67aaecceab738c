import { connect } from 'node:net';
import { startForwardProxy, type ForwardProxy } from '../../../providers/mock/forward-proxy.js';
import { getViaProxy, getViaTunnel, selfSignedCert, startTarget, type Target } from './local-servers.js';

describe('the forward proxy', () => {
  let http: Target;
  let https: Target;
  let proxy: ForwardProxy;
  const tls = selfSignedCert();

  beforeAll(async () => {
    [http, https] = await Promise.all([startTarget('http'), startTarget('https', tls)]);
  });
  afterAll(() => Promise.all([http.close(), https.close()]));
  beforeEach(async () => {
    proxy = await startForwardProxy({ host: '127.0.0.1', port: 0 });
  });
  afterEach(() => proxy.close());

  it('forwards an absolute-URI HTTP request and counts it', async () => {
    const res = await getViaProxy(proxy, `http://127.0.0.1:${http.port}/page?q=1`);
    expect(res).toEqual({ status: 200, body: 'http GET /page?q=1' });
    expect(proxy.stats).toEqual({ connects: 0, requests: 1 });
  });

  it('tunnels HTTPS through CONNECT end to end (the target certificate verifies) and counts it', async () => {
    const res = await getViaTunnel(proxy, https.port, '/secure', tls.cert);
    expect(res).toEqual({ status: 200, body: 'https GET /secure' });
    expect(proxy.stats).toEqual({ connects: 1, requests: 0 });
  });

  it('answers 502 when the upstream refuses', async () => {
    const closed = await startTarget('http');
    await closed.close();
    expect((await getViaProxy(proxy, `http://127.0.0.1:${closed.port}/`)).status).toBe(502);
  });

  it('answers 400 to a request that is not an absolute http URI', async () => {
    expect((await getViaProxy(proxy, '/relative')).status).toBe(400);
  });

  it('refuses connections once closed', async () => {
    await proxy.close();
    const refused = await new Promise<string>((resolve) => {
      const s = connect(proxy.port, proxy.host);
      s.on('connect', () => resolve('connected'));
      s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
  });
});

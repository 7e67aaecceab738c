import { connect } from 'node:net';
import { authorizes, startForwardProxy, type ForwardProxy } from '../../../providers/mock/forward-proxy.js';
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
    expect(proxy.stats).toEqual({ connects: 0, requests: 1, refusedAuth: 0 });
  });

  it('tunnels HTTPS through CONNECT end to end (the target certificate verifies) and counts it', async () => {
    const res = await getViaTunnel(proxy, https.port, '/secure', tls.cert);
    expect(res).toEqual({ status: 200, body: 'https GET /secure' });
    expect(proxy.stats).toEqual({ connects: 1, requests: 0, refusedAuth: 0 });
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

const basic = (userinfo: string) => `Basic ${Buffer.from(userinfo).toString('base64')}`;

describe('which Proxy-Authorization headers the forward proxy accepts', () => {
  const credentials = { username: 'crawler', password: 's3cret:with-colon' };
  it.each<[string, string | undefined, boolean]>([
    ['the exact credentials', basic('crawler:s3cret:with-colon'), true],
    ['the scheme in any case', basic('crawler:s3cret:with-colon').replace('Basic', 'basic'), true],
    ['no header', undefined, false],
    ['a wrong password', basic('crawler:s3cret'), false],
    ['a wrong username', basic('other:s3cret:with-colon'), false],
    ['the password as a prefix of a longer one', basic('crawler:s3cret:with-colon!'), false],
    ['another scheme', 'Bearer abc', false],
    ['garbage after Basic', 'Basic !!!', false],
  ])('%s: %s', (_name, header, accepted) => {
    expect(authorizes(header, credentials)).toBe(accepted);
  });
});

describe('a forward proxy with credentials (as the mock provider starts it for a Managed proxy)', () => {
  let http: Target;
  let https: Target;
  let proxy: ForwardProxy;
  const tls = selfSignedCert();
  const right = { 'proxy-authorization': basic('crawler:pw') };
  const wrong = { 'proxy-authorization': basic('crawler:guess') };

  beforeAll(async () => {
    [http, https] = await Promise.all([startTarget('http'), startTarget('https', tls)]);
    proxy = await startForwardProxy({
      host: '127.0.0.1',
      port: 0,
      credentials: { username: 'crawler', password: 'pw' },
    });
  });
  afterAll(() => Promise.all([http.close(), https.close(), proxy.close()]));

  it('answers 407 with a Basic challenge to a plain request without or with wrong credentials', async () => {
    const url = `http://127.0.0.1:${http.port}/page`;
    expect((await getViaProxy(proxy, url)).status).toBe(407);
    expect((await getViaProxy(proxy, url, wrong)).status).toBe(407);
    expect(await getViaProxy(proxy, url, right)).toEqual({ status: 200, body: 'http GET /page' });
  });

  it('refuses a CONNECT without the credentials and tunnels one with them', async () => {
    await expect(getViaTunnel(proxy, https.port, '/s', tls.cert)).rejects.toThrow('CONNECT answered 407');
    await expect(getViaTunnel(proxy, https.port, '/s', tls.cert, wrong)).rejects.toThrow(
      'CONNECT answered 407',
    );
    expect(await getViaTunnel(proxy, https.port, '/s', tls.cert, right)).toEqual({
      status: 200,
      body: 'https GET /s',
    });
  });

  it('counts what it refused and forwards nothing it refused', () => {
    expect(proxy.stats).toEqual({ connects: 1, requests: 1, refusedAuth: 4 });
  });
});

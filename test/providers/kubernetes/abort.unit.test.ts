import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { KubernetesProvider } from '../../../providers/kubernetes/kubernetes-provider.js';
import { startBlackHole, type BlackHole } from '../dead-ends.js';

let blackHole: BlackHole;
let provider: KubernetesProvider;

beforeAll(async () => {
  blackHole = await startBlackHole();
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${blackHole.port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  provider = new KubernetesProvider(
    'kubernetes',
    { namespace: 'proxies', image: 'ubuntu/squid' },
    pino({ level: 'silent' }),
    kc,
  );
});
afterAll(() => blackHole.close());

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the kubernetes provider under an AbortSignal', () => {
  it.each([
    [
      'create',
      (s: AbortSignal) =>
        provider.create({ uid: 'u', proxy: 'n/p', namespace: 'n', owner: 'o', port: 3128, placement: {} }, s),
    ],
    ['get', (s: AbortSignal) => provider.get('proxies/proxy-1', s)],
    ['delete', (s: AbortSignal) => provider.delete('proxies/proxy-1', s)],
    ['listByTag', (s: AbortSignal) => provider.listByTag('o', s)],
  ])('cancels the HTTP request of %s itself: the connection to the API server closes', async (_op, call) => {
    const ctl = new AbortController();
    const pending = call(ctl.signal);
    await until(() => blackHole.requested() === 1, 'the request to reach the API server');
    const reason = new Error('shutdown');
    ctl.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await until(() => blackHole.open() === 0, 'the connection to close');
  });
});

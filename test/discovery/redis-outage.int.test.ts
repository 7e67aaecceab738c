// Redis unreachable, seen from outside a real discovery process (`--lease-store=redis`):
// every call that needs the book answers 503 (store_unavailable; outcome_unknown for a write
// a frozen Redis may still run) with Retry-After within the
// bounded time (Redis gone: at once; Redis frozen: within --redis-timeout), /readyz stays
// 200 (the readiness rule: Ready does not follow Redis), /metrics still answers and says
// proxy_operator_lease_store_up 0, and it recovers by itself when Redis is back.
import { CoreV1Api } from '@kubernetes/client-node';
import { request } from 'undici';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { KUBECONFIG_ENV, testKubeConfig, uniqueName } from '../harness/kube.js';
import { readyz, runOperator, scrape, until, type OperatorProcess } from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';

const kc = testKubeConfig();
const namespace = uniqueName('redis-outage');
const TIMEOUT_MS = 400;
let redis: RedisServer;
let op: OperatorProcess;
let port: number;
let metrics: number;

async function call(method: string, path: string, body?: unknown) {
  const started = Date.now();
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    method: method as 'GET',
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 10_000,
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    retryAfter: res.headers['retry-after'],
    body: (text === '' ? undefined : JSON.parse(text)) as Record<string, unknown>,
    millis: Date.now() - started,
  };
}

beforeAll(async () => {
  redis = await startRedisServer();
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const proxies = new ProxyApi(kc, namespace);
  await proxies.create('p0', {
    spec: { mode: 'External', endpoint: { host: '127.0.0.10', port: 3128 }, maxLeases: 5 },
  });
  await proxies.patchStatus('p0', {
    phase: 'Ready',
    latencyMillis: 10,
    conditions: [
      {
        type: 'Healthy',
        status: 'True',
        reason: 'ProbeSucceeded',
        message: 'test',
        lastTransitionTime: new Date().toISOString(),
      },
    ],
  });
  [port, metrics] = [await freePort(), await freePort()];
  op = runOperator([
    '--kubeconfig',
    process.env[KUBECONFIG_ENV]!,
    '--watch-namespace',
    namespace,
    '--components=discovery',
    '--lease-store=redis',
    `--redis-url=${redis.url}`,
    `--redis-timeout=${TIMEOUT_MS}`,
    '--metrics-address',
    `127.0.0.1:${metrics}`,
    '--discovery-address',
    `127.0.0.1:${port}`,
  ]);
  await until(
    'the replica leasing',
    async () => {
      const res = await call('POST', '/v1/leases', { ttlSeconds: 5 });
      return res.status === 201 ? true : undefined;
    },
    90_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${op.output()}`);
  });
});

afterAll(async () => {
  op?.child.kill('SIGKILL');
  await op?.exited;
  await redis?.stop();
});

describe('a discovery process whose Redis is unreachable', () => {
  const bookCalls: [string, string, unknown][] = [
    ['POST', '/v1/leases', { ttlSeconds: 60 }],
    ['POST', '/v1/leases/some-lease/renew', {}],
    ['POST', '/v1/leases/some-lease/report', { result: 'ok' }],
    ['DELETE', '/v1/leases/some-lease', undefined],
    ['GET', '/v1/proxies', undefined],
  ];

  /**
   * `writes`: what a write answers. A read never changes anything: store_unavailable. A write
   * sent to a frozen Redis may run when it resumes: outcome_unknown (retry with the same
   * Idempotency-Key); one to a Redis that is gone never left (store_unavailable), unless it
   * was written before the connection was seen closed (outcome_unknown again).
   */
  async function expectUnavailable(bound: number, writes: readonly string[]): Promise<void> {
    for (const [method, path, body] of bookCalls) {
      const res = await call(method, path, body);
      expect({
        call: `${method} ${path}`,
        status: res.status,
        retryAfter: res.retryAfter,
      }).toEqual({ call: `${method} ${path}`, status: 503, retryAfter: '1' });
      expect(method === 'GET' ? ['store_unavailable'] : writes).toContain(res.body.error);
      // The cause is the log's: the Redis client's text names the store's address.
      expect(res.body.message).not.toMatch(/\d+\.\d+\.\d+\.\d+|ECONN|ETIMEDOUT|:\d+/);
      expect(res.millis).toBeLessThan(bound);
    }
    // Ready does not follow Redis, and the metrics endpoint still answers, saying what is wrong.
    expect(await readyz(metrics)).toBe(true);
    expect(await scrape(metrics)).toMatch(/^proxy_operator_lease_store_up 0$/m);
    // The 503 is counted as a lease request's outcome (ProxyLeaseStoreErrors reads it).
    expect(await scrape(metrics)).toMatch(
      /^proxy_operator_lease_requests_total\{outcome="store_unavailable"\} [1-9]/m,
    );
  }

  async function expectRecovered(): Promise<void> {
    await until(
      'a lease again',
      async () => ((await call('POST', '/v1/leases', { ttlSeconds: 5 })).status === 201 ? true : undefined),
      30_000,
    );
    expect(await scrape(metrics)).toMatch(/^proxy_operator_lease_store_up 1$/m);
  }

  it('gone (killed): 503 store_unavailable with Retry-After at once, then recovers by itself when it is back', async () => {
    await redis.kill();
    await expectUnavailable(1000, ['store_unavailable', 'outcome_unknown']);
    await redis.start();
    await expectRecovered();
  });

  it('frozen (connections open, no answer): 503 within the timeout, no hung request, then recovers', async () => {
    redis.pause();
    try {
      // --redis-timeout plus the HTTP round trip: well under a second, never the 15 s request deadline.
      await expectUnavailable(TIMEOUT_MS + 1500, ['outcome_unknown']);
    } finally {
      redis.resume();
    }
    await expectRecovered();
  });
});

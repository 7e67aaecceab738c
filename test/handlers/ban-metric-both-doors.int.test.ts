// The operator as it runs (the discovery API and the gateway over one book, wired by
// createProxyOperator): a ban the gateway sees on plain HTTP and a ban a client reports to the
// API both count in proxy_operator_target_cooldowns_total, each once, by its door.
import { request } from 'undici';
import { TARGET_COOLDOWNS_METRIC } from '../../discovery/target-cooldown-metrics.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { GatewayRunner } from '../../handlers/gateway-runner.js';
import { PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { DEFAULT_GATEWAY_SETTINGS, DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { startEchoSite, type EchoSite } from '../gateway/echo-site.js';
import { getViaProxy } from '../providers/mock/local-servers.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  condition,
  eventually,
  fastHealthCheck,
  quiet,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from './operator-fixture.js';

const kc = testKubeConfig();
const namespace = uniqueName('ban-metric');
const TOKEN = 'ban-metric-token-0123456789abcdef';
const IPS = ['127.0.0.42', '127.0.0.43'];

let api: ProxyApi;
let target: LocalTarget;
let site: EchoSite;
let mock: MockProvider;
let op: RunningOperator;
let gatewayPort: number;
const proxies: ForwardProxy[] = [];

/** The counter's value for one target and door, as /metrics has it (0: no series). */
async function counted(targetLabel: string, door: 'api' | 'gateway'): Promise<number> {
  const values = (await op.registry.getSingleMetric(TARGET_COOLDOWNS_METRIC)?.get())?.values ?? [];
  return values.find((v) => v.labels.target === targetLabel && v.labels.door === door)?.value ?? 0;
}

/** A plain-HTTP GET through the gateway, as any HTTP client sends it to its proxy. */
function viaGateway(username: string, url: string): Promise<{ status: number; body: string }> {
  return getViaProxy({ host: '127.0.0.1', port: gatewayPort }, url, {
    host: new URL(url).host,
    'proxy-authorization': `Basic ${Buffer.from(`${username}:${TOKEN}`).toString('base64')}`,
  });
}

async function callAPI(
  path: string,
  body: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(`${op.discoveryURL}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  site = await startEchoSite();
  mock = new MockProvider('mock', { provisioningSeconds: 0.3 }, quiet);
  gatewayPort = await freePort();
  op = await startOperator(
    kc,
    { mock },
    namespace,
    {
      discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, token: TOKEN, metricsTargetNames: true },
      gateway: {
        ...DEFAULT_GATEWAY_SETTINGS,
        host: '127.0.0.1',
        port: gatewayPort,
        idleSeconds: 1,
        connectTimeoutMs: 1000,
      },
    },
    [...PROXY_HANDLERS, GatewayRunner] as typeof PROXY_HANDLERS,
  );
  for (const [i, ip] of IPS.entries()) {
    const fp = await startForwardProxy({ host: ip, port: await freePort() });
    proxies.push(fp);
    await api.create(`p${i}`, {
      spec: {
        mode: 'External',
        endpoint: { host: ip, port: fp.port },
        maxLeases: 10,
        healthCheck: fastHealthCheck(target),
      },
    });
  }
  for (let i = 0; i < IPS.length; i++)
    await eventually(
      `p${i} healthy`,
      async () => condition(await api.get(`p${i}`), 'Healthy')?.status === 'True' || undefined,
    );
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await mock?.close();
  for (const fp of proxies) await fp.close();
  await site?.close();
  await target?.close();
});

describe('proxy_operator_target_cooldowns_total in the operator, through both doors', () => {
  it("counts the gateway's own ban as door=gateway and a client's API report as door=api, each once", async () => {
    const first = await viaGateway('session-m1', site.httpURL);
    expect(first.status).toBe(200);
    site.banned.add(first.body.trim());
    expect((await viaGateway('session-m1', site.httpURL)).status).toBe(403);
    // The gateway reports after answering: wait for the count.
    await eventually(
      'the gateway ban counted',
      async () => (await counted('127.0.0.1', 'gateway')) === 1 || undefined,
    );
    expect(await counted('127.0.0.1', 'api')).toBe(0);

    const lease = await callAPI('/v1/leases', { ttlSeconds: 60, target: 'shop.example' });
    expect(lease.status).toBe(201);
    const report = await callAPI(`/v1/leases/${String(lease.body.leaseID)}/report`, {
      result: 'banned',
      target: 'shop.example',
    });
    expect(report.status).toBe(200);
    expect(await counted('shop.example', 'api')).toBe(1);
    expect(await counted('shop.example', 'gateway')).toBe(0);
    expect(await counted('127.0.0.1', 'gateway')).toBe(1);
  }, 60_000);
});

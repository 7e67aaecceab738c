// Issue 23 item 1 end to end: a real operator against the real API server, a real forward
// proxy on loopback that requires basic auth, the real discovery API and the client. Leases
// carry the credentials (percent-encoded userinfo that works as-is), lists never do, a rotated
// Secret reaches probes and the next lease, and no password reaches the logs or Events.
import { CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { pino } from 'pino';
import { request } from 'undici';
import { DiscoveryClient } from '../../client/src/index.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import { CREDENTIALS_SECRET_LABEL } from '../../crds/proxy-credentials.js';
import type { Proxy } from '../../crds/proxy-types.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import {
  condition,
  eventually,
  fastHealthCheck,
  managedSpec,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from '../handlers/operator-fixture.js';
import { TestForwardProxy } from '../health/forward-proxy.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { statusThrough } from '../providers/mock/local-servers.js';

const kc = testKubeConfig();
const core = kc.makeApiClient(CoreV1Api);
const namespace = uniqueName('proxy-creds');
const TOKEN = 'discovery-test-token';

// Characters a URL's userinfo must percent-encode, so a URL built by concatenation would break.
const FIRST = { username: 'crawler@team', password: 'p@ss:w/rd%?#[] é' };
const SECOND = { username: 'crawler@team', password: 'rotated/+=:@%' };

/** Every JSON line the operator (and the mock provider) logged, at every level. */
const logLines: string[] = [];
const capture = pino({ level: 'trace' }, { write: (line: string) => void logLines.push(line) });

let api: ProxyApi;
let target: LocalTarget;
let forward: TestForwardProxy;
let mock: MockProvider;
let op: RunningOperator;
let client: DiscoveryClient;
let baseUrl: string;

const basic = (c: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;

function credentialsSecret(name: string, c: { username: string; password: string }): V1Secret {
  return {
    metadata: { name, labels: { [CREDENTIALS_SECRET_LABEL]: 'true' } },
    type: 'kubernetes.io/basic-auth',
    stringData: { username: c.username, password: c.password },
  };
}

async function healthy(name: string, status: 'True' | 'False', reason?: string): Promise<Proxy> {
  return eventually(`${name} Healthy=${status}${reason ? `/${reason}` : ''}`, async () => {
    const p = await api.get(name);
    const h = condition(p, 'Healthy');
    return h?.status === status && (reason === undefined || h.reason === reason) ? p : undefined;
  });
}

/** A GET through the leased proxy URL, as a crawler would use it: the status, or the error's message. */
const fetchThrough = (proxyURL: string) => statusThrough(proxyURL, target.url);

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  forward = await TestForwardProxy.start();
  forward.requiredAuthorization = basic(FIRST);
  mock = new MockProvider('mock', { provisioningSeconds: 0.3, serveTraffic: true }, capture);
  const port = await freePort();
  op = await startOperator(
    kc,
    { mock },
    namespace,
    { discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, host: '127.0.0.1', port, token: TOKEN } },
    undefined,
    capture,
  );
  baseUrl = `http://127.0.0.1:${port}`;
  client = new DiscoveryClient({ baseUrl, token: TOKEN });
  await core.createNamespacedSecret({ namespace, body: credentialsSecret('ext-creds', FIRST) });
  await api.create('ext', {
    spec: {
      mode: 'External',
      endpoint: { host: '127.0.0.1', port: forward.port, credentialsSecretRef: { name: 'ext-creds' } },
      attributes: { kind: 'external' },
      healthCheck: fastHealthCheck(target),
    },
  });
  await api.create('managed', { spec: managedSpec(target, { attributes: { kind: 'managed' } }) });
});

afterAll(async () => {
  await op?.stop();
  await mock?.close();
  await forward?.close();
  await target?.close();
});

describe('credentials from the Secret to the crawler', () => {
  it('probes an External proxy with its credentials, and a lease hands them out as a working URL', async () => {
    await healthy('ext', 'True');
    const lease = await eventually('a lease of ext', () =>
      client.lease({ selector: { kind: 'external' }, ttlSeconds: 60 }).catch(() => undefined),
    );
    expect(lease.proxy.username).toBe(FIRST.username);
    expect(lease.proxy.password).toBe(FIRST.password);
    expect(lease.proxy.url).toBe(
      `http://${encodeURIComponent(FIRST.username)}:${encodeURIComponent(FIRST.password)}@127.0.0.1:${forward.port}`,
    );
    // Parsed back by the WHATWG parser, the userinfo is the credentials, not part of the host.
    const parsed = new URL(lease.proxy.url);
    expect([decodeURIComponent(parsed.username), decodeURIComponent(parsed.password)]).toEqual([
      FIRST.username,
      FIRST.password,
    ]);
    expect(parsed.host).toBe(`127.0.0.1:${forward.port}`);
    const before = forward.connectCount + forward.requestCount;
    expect(await fetchThrough(lease.proxy.url)).toBe(200);
    expect(forward.connectCount + forward.requestCount).toBeGreaterThan(before);
    // The same proxy without the userinfo is refused: the 200 came from the credentials.
    expect(String(await fetchThrough(`http://127.0.0.1:${forward.port}`))).toMatch(/407/);
    await client.release(lease.leaseID);
  });

  it('never lists credentials: not in GET /v1/proxies, not in GET /v1/proxies/{id}', async () => {
    const listed = await client.listProxies();
    expect(listed.map((p) => p.id).sort()).toEqual([`${namespace}/ext`, `${namespace}/managed`]);
    const one = await client.getProxy({ namespace, name: 'ext' });
    for (const view of [...listed, one]) {
      expect(view).not.toHaveProperty('username');
      expect(view).not.toHaveProperty('password');
      expect(view).not.toHaveProperty('url');
    }
    // And not in the raw bytes either (no field the client would drop).
    const raw = await request(`${baseUrl}/v1/proxies`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const text = await raw.body.text();
    expect(raw.statusCode).toBe(200);
    expect(text).not.toContain(FIRST.username);
    expect(text).not.toContain(encodeURIComponent(FIRST.password));
  });

  it('hands a Managed proxy its generated credentials with every lease', async () => {
    await healthy('managed', 'True');
    const secret = await core.readNamespacedSecret({ namespace, name: 'managed-proxy-credentials' });
    const password = Buffer.from(secret.data!.password, 'base64').toString('utf8');
    const lease = await eventually('a lease of managed', () =>
      client.lease({ selector: { kind: 'managed' }, ttlSeconds: 60 }).catch(() => undefined),
    );
    expect(lease.proxy.password).toBe(password);
    expect(new URL(lease.proxy.url).password).toBe(password); // generated: URL-safe as is
    await client.release(lease.leaseID);
  });

  it('picks a rotated External Secret up in probes and in the next lease, without replacing anything', async () => {
    const uid = (await api.get('ext')).metadata.uid;
    // The proxy still wants the old credentials: a 407 now proves the probes send the new ones.
    await core.replaceNamespacedSecret({
      namespace,
      name: 'ext-creds',
      body: credentialsSecret('ext-creds', SECOND),
    });
    const refused = await healthy('ext', 'False', 'ProxyAuthenticationRequired');
    expect(condition(refused, 'Healthy')?.message).not.toContain(SECOND.password);
    forward.requiredAuthorization = basic(SECOND);
    await healthy('ext', 'True');
    const lease = await eventually('a lease of ext after the rotation', () =>
      client.lease({ selector: { kind: 'external' }, ttlSeconds: 60 }).catch(() => undefined),
    );
    expect(lease.proxy.password).toBe(SECOND.password);
    expect(await fetchThrough(lease.proxy.url)).toBe(200);
    await client.release(lease.leaseID);
    expect((await api.get('ext')).metadata.uid).toBe(uid);
  });

  it('logged no password, userinfo or Proxy-Authorization value, and no Event or status holds one', async () => {
    const managed = await core.readNamespacedSecret({ namespace, name: 'managed-proxy-credentials' });
    const generated = {
      username: Buffer.from(managed.data!.username, 'base64').toString('utf8'),
      password: Buffer.from(managed.data!.password, 'base64').toString('utf8'),
    };
    const secrets = [FIRST, SECOND, generated].flatMap((c) => [
      c.password,
      encodeURIComponent(c.password),
      basic(c).slice('Basic '.length),
    ]);
    // The capture is live: the suite did create, probe, 407, rotation and lease.
    expect(logLines.length).toBeGreaterThan(10);
    const logs = logLines.join('');
    const events = JSON.stringify((await core.listNamespacedEvent({ namespace })).items);
    const proxies = JSON.stringify([await api.get('ext'), await api.get('managed')]);
    expect(events).toContain('ProxyAuthenticationRequired'); // the 407 was recorded, its cause named
    for (const secret of secrets) {
      expect(logs).not.toContain(secret);
      expect(events).not.toContain(secret);
      expect(proxies).not.toContain(secret);
    }
  });
});

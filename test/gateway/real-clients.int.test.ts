// Issue 46 item 7: real clients (curl, Python requests, Scrapy with only its own
// HttpProxyMiddleware, undici, Crawlee) through the gateway
// of a real operator on the real API server, over External Proxies that are real forward
// proxies on their own loopback addresses (requiring credentials the clients never see):
// HTTP and HTTPS (CONNECT) each, a session on one exit IP per target, a ban on plain HTTP
// moving the session, and a proxy dying mid-run costing the clients 0 failed requests.
import { execFile } from 'node:child_process';
import { writeFileSync, mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { Configuration, HttpCrawler, log as crawleeLog, LogLevel, ProxyConfiguration } from '@crawlee/http';
import { ProxyAgent, request } from 'undici';
import { CREDENTIALS_SECRET_LABEL } from '../../crds/proxy-credentials.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { GatewayRunner } from '../../handlers/gateway-runner.js';
import { PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { DEFAULT_GATEWAY_SETTINGS, DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import {
  condition,
  eventually,
  fastHealthCheck,
  quiet,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from '../handlers/operator-fixture.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { cleanEnv, venvPython } from '../python/python-env.js';
import { startEchoSite, type EchoSite } from './echo-site.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const PYTHON = join(root, '.ci/moto/bin/python');
const THROUGH_GATEWAY = join(root, 'python/tests/crawl/through_gateway.py');
const kc = testKubeConfig();
const namespace = uniqueName('gateway-clients');
const TOKEN = 'gateway-clients-token-0123456789';
const CREDS = { username: 'fleet', password: 'upstream-only-secret' };
// Six: two get banned for the site and up to three die along the way; the last tests still
// need a proxy to move to.
const IPS = ['127.0.0.12', '127.0.0.13', '127.0.0.14', '127.0.0.15', '127.0.0.16', '127.0.0.17'];

let api: ProxyApi;
let target: LocalTarget;
let mock: MockProvider;
let op: RunningOperator;
let site: EchoSite;
let gatewayPort: number;
let caFile: string;
const proxies = new Map<string, ForwardProxy>();

const gatewayURL = (username: string) => `http://${username}:${TOKEN}@127.0.0.1:${gatewayPort}`;

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  site = await startEchoSite();
  caFile = join(mkdtempSync(join(tmpdir(), 'gateway-ca-')), 'ca.pem');
  writeFileSync(caFile, site.ca);
  mock = new MockProvider('mock', { provisioningSeconds: 0.3 }, quiet);
  gatewayPort = await freePort();
  op = await startOperator(
    kc,
    { mock },
    namespace,
    {
      discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, token: TOKEN },
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
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: {
      metadata: { name: 'fleet-creds', labels: { [CREDENTIALS_SECRET_LABEL]: 'true' } },
      type: 'kubernetes.io/basic-auth',
      stringData: CREDS,
    },
  });
  for (const [i, ip] of IPS.entries()) {
    const fp = await startForwardProxy({ host: ip, port: await freePort(), credentials: CREDS });
    proxies.set(ip, fp);
    await api.create(`p${i}`, {
      spec: {
        mode: 'External',
        endpoint: { host: ip, port: fp.port, credentialsSecretRef: { name: 'fleet-creds' } },
        maxLeases: 50,
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
  for (const fp of proxies.values()) await fp.close();
  await site?.close();
  await target?.close();
});

async function curl(username: string, url: string): Promise<{ status: number; body: string }> {
  const { stdout } = await run('curl', [
    '-sS',
    '--noproxy',
    '',
    '-x',
    `http://127.0.0.1:${gatewayPort}`,
    '-U',
    `${username}:${TOKEN}`,
    '--cacert',
    caFile,
    '-w',
    '\n%{http_code}',
    url,
  ]);
  const cut = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
}

async function pythonRequests(
  username: string,
  url: string,
  count: number,
): Promise<{ status: number; body: string }[]> {
  if (!existsSync(PYTHON)) throw new Error(`${PYTHON} (a venv with requests) is missing: .ci/run creates it`);
  const script = [
    'import json, sys, requests',
    'proxy, url, ca, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])',
    's = requests.Session()',
    "s.proxies = {'http': proxy, 'https': proxy}",
    's.verify = ca',
    'out = []',
    'for _ in range(n):',
    '    r = s.get(url, timeout=10)',
    "    out.append({'status': r.status_code, 'body': r.text})",
    'print(json.dumps(out))',
  ].join('\n');
  const { stdout } = await run(PYTHON, ['-c', script, gatewayURL(username), url, caFile, String(count)], {
    env: { PATH: process.env.PATH ?? '', NO_PROXY: '', no_proxy: '' },
  });
  return JSON.parse(stdout) as { status: number; body: string }[];
}

/** Scrapy (the venv .ci/run makes) with meta['proxy'] = the gateway URL, one request at a time:
 * python/tests/crawl/through_gateway.py. */
async function viaScrapy(
  username: string,
  urls: string[],
  count: number,
  delaySeconds = 0,
): Promise<{ status: number; body: string; error?: string }[]> {
  const { stdout } = await run(
    venvPython(),
    [THROUGH_GATEWAY, gatewayURL(username), String(count), ...urls],
    {
      env: cleanEnv({ DELAY: String(delaySeconds), PYTHONWARNINGS: '' }),
    },
  );
  return JSON.parse(stdout) as { status: number; body: string; error?: string }[];
}

async function viaUndici(username: string, url: string): Promise<{ status: number; body: string }> {
  const dispatcher = new ProxyAgent({
    uri: `http://127.0.0.1:${gatewayPort}`,
    token: `Basic ${Buffer.from(`${username}:${TOKEN}`).toString('base64')}`,
    requestTls: { ca: site.ca },
  });
  try {
    const res = await request(url, { dispatcher });
    return { status: res.statusCode, body: await res.body.text() };
  } finally {
    await dispatcher.close();
  }
}

const ipOf = (body: string) => body.trim();

describe('real clients through the gateway', () => {
  it.each([
    ['curl', 'http'],
    ['curl', 'https'],
    ['python-requests', 'http'],
    ['python-requests', 'https'],
    ['scrapy', 'http'],
    ['scrapy', 'https'],
    ['undici', 'http'],
    ['undici', 'https'],
  ])('%s over %s: every request answered, one exit IP for the session', async (client, scheme) => {
    const url = scheme === 'http' ? site.httpURL : site.httpsURL;
    // '--' is a '-' inside the session id: it must survive each client's URL handling.
    const session = `session-${client.replace('-', '--')}--${scheme}`;
    let answers: { status: number; body: string }[] = [];
    if (client === 'python-requests') answers = await pythonRequests(session, url, 5);
    else if (client === 'scrapy') answers = await viaScrapy(session, [url], 5);
    else for (let i = 0; i < 5; i++) answers.push(await (client === 'curl' ? curl : viaUndici)(session, url));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    const exits = new Set(answers.map((a) => ipOf(a.body)));
    expect(exits.size).toBe(1);
    expect(IPS).toContain([...exits][0]);
  });

  it('Crawlee with proxyUrls naming the gateway crawls HTTP and HTTPS pages', async () => {
    crawleeLog.setLevel(LogLevel.ERROR);
    const fetched: string[] = [];
    const failed: string[] = [];
    const crawler = new HttpCrawler(
      {
        proxyConfiguration: new ProxyConfiguration({ proxyUrls: [gatewayURL('session-crawlee')] }),
        ignoreSslErrors: false,
        additionalMimeTypes: ['text/plain'],
        maxRequestRetries: 0,
        requestHandler: async ({ request, body }) =>
          void fetched.push(`${request.url} ${String(body).trim()}`),
        failedRequestHandler: ({ request }) => void failed.push(request.url),
        preNavigationHooks: [
          (_ctx, gotOptions) => {
            gotOptions.https = { ...gotOptions.https, certificateAuthority: site.ca };
          },
        ],
      },
      new Configuration({ persistStorage: false, purgeOnStart: true }),
    );
    const urls = [...Array(4).keys()].flatMap((i) => [
      `${site.httpURL}?page=${i}`,
      `${site.httpsURL}?page=${i}`,
    ]);
    await crawler.run(urls);
    expect(failed).toEqual([]);
    expect(fetched).toHaveLength(8);
    expect(new Set(fetched.map((f) => f.split(' ')[1])).size).toBe(1);
  });

  it('a ban on plain HTTP moves the session; the banned proxy carries nothing more there', async () => {
    const first = ipOf((await curl('session-banme', site.httpURL)).body);
    site.banned.add(first);
    expect((await curl('session-banme', site.httpURL)).status).toBe(403); // the site's answer
    const since = site.seen.length;
    for (let i = 0; i < 5; i++) expect((await curl('session-banme', site.httpURL)).status).toBe(200);
    expect(site.seen.slice(since)).not.toContain(first);
    expect(new Set(site.seen.slice(since)).size).toBe(1);
    site.banned.clear();
  });

  it('Scrapy: a ban on plain HTTP moves the session; the site answers 403 once, then 200 from one other exit', async () => {
    const [first] = await viaScrapy('session-scrapyban', [site.httpURL], 1);
    const banned = ipOf(first.body);
    site.banned.add(banned);
    try {
      const since = site.seen.length;
      const answers = await viaScrapy('session-scrapyban', [site.httpURL], 6);
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 403]);
      const after = site.seen.slice(since + 1);
      expect(after).not.toContain(banned);
      expect(new Set(after).size).toBe(1);
    } finally {
      site.banned.clear();
    }
  });

  it('a proxy dying mid-run costs the clients 0 failed requests', async () => {
    const statuses: number[] = [];
    const dying = ipOf((await viaUndici('session-dies', site.httpsURL)).body);
    const python = ipOf((await pythonRequests('session-diespy', site.httpURL, 1))[0].body);
    let exits = new Set<string>();
    for (let i = 0; i < 20; i++) {
      if (i === 5) {
        await proxies.get(dying)!.close();
        if (python !== dying) await proxies.get(python)!.close();
      }
      const a = await viaUndici('session-dies', i % 2 === 0 ? site.httpsURL : site.httpURL);
      statuses.push(a.status);
      if (i >= 5) exits.add(ipOf(a.body));
    }
    const py = await pythonRequests('session-diespy', site.httpsURL, 5);
    statuses.push(...py.map((a) => a.status));
    statuses.push((await curl('session-dies', site.httpsURL)).status);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(exits.has(dying)).toBe(false);
    exits = new Set(py.map((a) => ipOf(a.body)));
    expect(exits.has(python) || exits.has(dying)).toBe(false);
    expect(exits.size).toBe(1);
  });

  it("Scrapy: the session's proxy dying mid-crawl costs it 0 failed requests (HTTP and HTTPS)", async () => {
    const urls = [site.httpURL, site.httpsURL];
    const [first] = await viaScrapy('session-scrapydies', urls, 1);
    const dying = ipOf(first.body);
    const since = site.seen.length;
    // Ten requests 0.3 s apart; the proxy closes once three of them have reached the site.
    const crawl = viaScrapy('session-scrapydies', urls, 10, 0.3);
    await eventually(
      'three Scrapy requests through the session',
      async () => site.seen.length >= since + 3 || undefined,
    );
    await proxies.get(dying)!.close();
    const closedAt = site.seen.length;
    const answers = await crawl;
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    const after = site.seen.slice(closedAt);
    expect(after.length).toBeGreaterThan(0);
    expect(after).not.toContain(dying);
    expect(new Set(after).size).toBe(1);
  }, 120_000);

  it('holds no lease once the clients are gone', async () => {
    await eventually('leases released', async () => {
      const text = await (
        await fetch(`${op.discoveryURL}/v1/proxies`, { headers: { authorization: `Bearer ${TOKEN}` } })
      ).text();
      const items = (JSON.parse(text) as { items: { activeLeases: number }[] }).items;
      return items.every((p) => p.activeLeases === 0) || undefined;
    });
  });
});

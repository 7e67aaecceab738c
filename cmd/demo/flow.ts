import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ProxyAgent, request } from 'undici';
import { stringify } from 'yaml';
import { API_VERSION, GROUP, KIND, PLURAL, VERSION, type Proxy } from '../../crds/proxy-types.js';
import type { DemoEnvironment } from './environment.js';
import { proxyTable, tableLine } from './proxy-table.js';

export type Print = (line: string) => void;

export interface DemoSummary {
  ready: string[];
  listed: number;
  leasedProxy: string;
  fetchedStatus: number;
  fetchedBody: string;
  afterBanLeasedProxy: string;
  allCoolingDownStatus: number;
  allCoolingDownError: string;
  releaseStatuses: number[];
  /** status.exitIP by proxy name, as the echo at env.target.exitIPURL saw each proxy. */
  exitIPs: Record<string, string>;
  /** Step 8: a page through the gateway, and the exit IP a session kept. */
  gatewayStatus: number;
  gatewayBody: string;
  /** Step 9, with `--site`: what the strict site answered through each proxy. */
  site?: SiteSummary;
}

export interface SiteSummary {
  /** The proxy the site bans (demo-external) and its exit address. */
  bannedProxy: string;
  bannedExit: string;
  /** The site's status for a first page through each proxy, by proxy id. */
  statuses: Record<string, number>;
  /** Statuses of back-to-back requests through one unbanned proxy: 200s, then 429. */
  burst: number[];
  /** The 429's Retry-After header. */
  retryAfter: string;
  /** The status of the rate_limited report (with retryAfterSeconds) and the releases. */
  reportStatus: number;
  releaseStatuses: number[];
}

const NAMESPACE = 'default';
const TARGET = 'shop.example';

function sampleProxies(env: DemoEnvironment): Proxy[] {
  const healthCheck = {
    probeURL: env.target.probeURL,
    intervalSeconds: 5,
    timeoutSeconds: 2,
    failureThreshold: 2,
    successThreshold: 1,
    expectedStatusCodes: [200, 204],
    // The local target echoes the caller's address: each proxy's egress address.
    exitIPURL: env.target.exitIPURL,
  };
  // demo-managed, demo-managed-2, … (`--proxies`); the first keeps its name of old.
  const managed = Array.from({ length: env.options.managedProxies }, (_, i): Proxy => ({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: i === 0 ? 'demo-managed' : `demo-managed-${i + 1}`, namespace: NAMESPACE },
    spec: {
      mode: 'Managed',
      provider: 'mock',
      port: 3128,
      maxLeases: 5,
      attributes: { geo: 'local', purpose: 'demo' },
      placement: { region: 'local', zone: 'local-a', machineType: 'e2-micro', image: 'squid' },
      cloudInit: { inline: '#cloud-config\npackages: [squid]\n' },
      healthCheck,
      rotation: {},
    },
  }));
  return [
    ...managed,
    {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: 'demo-external', namespace: NAMESPACE },
      spec: {
        mode: 'External',
        endpoint: { host: env.externalProxy.host, port: env.externalProxy.port },
        port: 3128,
        maxLeases: 5,
        attributes: { geo: 'local', purpose: 'demo' },
        healthCheck,
        rotation: {},
      },
    },
  ];
}

async function api(
  env: DemoEnvironment,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown; text: string }> {
  const res = await request(`${env.discoveryURL}${path}`, {
    method,
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(env.options.token === undefined ? {} : { authorization: `Bearer ${env.options.token}` }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined, text };
}

/** Makes curl print the status after the body, as `answer()` shows every API answer. */
const STATUS_LINE = ` -w '\\nHTTP %{http_code}\\n'`;

/** curl's flag for the demo's bearer token (`--token`), so a printed command can be pasted as it is. */
export function authFlag(env: Pick<DemoEnvironment, 'options'>): string {
  return env.options.token === undefined ? '' : ` -H 'Authorization: Bearer ${env.options.token}'`;
}

function curl(env: DemoEnvironment, method: string, path: string, body?: unknown): string {
  const data = body === undefined ? '' : ` -d '${JSON.stringify(body)}'`;
  const m = method === 'GET' ? '' : ` -X${method}`;
  return `$ curl -s${m}${authFlag(env)} '${env.discoveryURL}${path}'${data}${STATUS_LINE}`;
}

/** What the printed curl command prints: the body as the server sent it, then the status. */
function answer(print: Print, status: number, body: string): void {
  print(body);
  print(`HTTP ${status}`);
}

/** The manifests step 1 applies, as a heredoc a person can paste. */
function applyCommand(k: string, proxies: readonly Proxy[]): string {
  const docs = proxies.map((p) => stringify(p).trimEnd()).join('\n---\n');
  return `$ ${k} apply -f - <<'EOF'\n${docs}\nEOF`;
}

/**
 * Prints `kubectl get px -w` as kubectl would: the API server's table of the CRD's printer
 * columns, a header, then a row whenever a proxy's row changes (its age aside).
 */
async function watchUntilReady(
  kc: KubeConfig,
  names: string[],
  print: Print,
  timeoutMs: number,
): Promise<void> {
  const seen = new Map<string, string>();
  const deadline = Date.now() + timeoutMs;
  let widths: number[] | undefined;
  let phases = new Map<string, string>();
  while (Date.now() < deadline) {
    const table = await proxyTable(kc, NAMESPACE);
    const phase = table.header.indexOf('PHASE');
    if (widths === undefined) {
      // Wide enough for the longest phase and a loopback address, like kubectl's first batch.
      const least: Record<string, number> = { PHASE: 'Provisioning'.length, IP: '127.0.0.255'.length };
      widths = table.header.map((h, i) =>
        Math.max(h.length, least[h] ?? 0, ...[...table.rows.values()].map((r) => r[i].length)),
      );
      print(tableLine(table.header, widths));
    }
    phases = new Map(names.map((n) => [n, table.rows.get(n)?.[phase] ?? '']));
    for (const name of names) {
      const row = table.rows.get(name);
      if (!row) continue;
      const key = row.slice(0, -1).join('\t');
      if (seen.get(name) !== key) {
        seen.set(name, key);
        print(tableLine(row, widths));
      }
    }
    if (names.every((n) => phases.get(n) === 'Ready')) return;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(
    `proxies not Ready within ${timeoutMs / 1000} s: ${[...phases].map(([n, p]) => `${n}=${p || '-'}`).join(', ')}`,
  );
}

/** The demo's scripted walk through the product, printing what a person would type. */
export async function runDemoFlow(env: DemoEnvironment, print: Print, kubectl: string): Promise<DemoSummary> {
  const kc = env.kubeConfig;
  const objects = kc.makeApiClient(CustomObjectsApi);
  const k = `${kubectl} --kubeconfig ${env.controlPlane.kubeconfigPath}`;

  const proxies = sampleProxies(env);
  const managedCount = proxies.length - 1;
  print(
    managedCount === 1
      ? '\n== 1. Apply two Proxy resources: one Managed by the mock provider, one External =='
      : `\n== 1. Apply ${proxies.length} Proxy resources: ${managedCount} Managed by the mock provider, one External ==`,
  );
  print(applyCommand(k, proxies));
  for (const p of proxies) {
    await objects.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: NAMESPACE,
      plural: PLURAL,
      body: p,
    });
  }

  print(`\n== 2. Watch them become Ready (probes go THROUGH each proxy to ${env.target.probeURL}) ==`);
  print(`$ ${k} get px -w`);
  const names = proxies.map((p) => p.metadata.name);
  await watchUntilReady(kc, names, print, 90_000);

  print(`\n== 2b. Each proxy's exit IP, as ${env.target.exitIPURL} saw it through the proxy ==`);
  const exitIPs = await waitForExitIPs(kc, names, 30_000);
  print(`$ ${k} get px -o wide`);
  const wide = await proxyTable(kc, NAMESPACE, true);
  const widths = wide.header.map((h, i) =>
    Math.max(h.length, ...[...wide.rows.values()].map((r) => r[i].length)),
  );
  print(tableLine(wide.header, widths));
  for (const name of names) print(tableLine(wide.rows.get(name) ?? [], widths));

  print('\n== 3. List healthy proxies through the discovery API ==');
  print(curl(env, 'GET', '/v1/proxies?healthy=true&attr.geo=local'));
  const list = await api(env, 'GET', '/v1/proxies?healthy=true&attr.geo=local');
  answer(print, list.status, list.text);
  const listed = ((list.json as { items?: unknown[] }).items ?? (list.json as unknown[])).length;

  print('\n== 4. Lease one (least-loaded first) ==');
  const leaseBody = { selector: { geo: 'local' }, ttlSeconds: 300, target: TARGET };
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  const lease1 = await api(env, 'POST', '/v1/leases', leaseBody);
  answer(print, lease1.status, lease1.text);
  const l1 = lease1.json as { leaseID: string; proxy: { id: string; url: string } };

  // The lease's URL, credentials included: every proxy requires them (407 without).
  print("\n== 5. Fetch a page THROUGH the leased proxy (its url carries the proxy's credentials) ==");
  print(`$ curl -s --noproxy '' -x '${l1.proxy.url}' ${env.target.url}${STATUS_LINE}`);
  const agent = new ProxyAgent(l1.proxy.url);
  const page = await request(env.target.url, { dispatcher: agent });
  const fetchedBody = await page.body.text();
  await agent.close();
  answer(print, page.statusCode, fetchedBody.trimEnd());

  print(`\n== 6. Report a ban on ${TARGET}: that proxy now cools down for that target ==`);
  print(curl(env, 'POST', `/v1/leases/${l1.leaseID}/report`, { result: 'banned', target: TARGET }));
  const report = await api(env, 'POST', `/v1/leases/${l1.leaseID}/report`, {
    result: 'banned',
    target: TARGET,
  });
  answer(print, report.status, report.text);
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  const lease2 = await api(env, 'POST', '/v1/leases', leaseBody);
  answer(print, lease2.status, lease2.text);
  const l2 = lease2.json as { leaseID: string; proxy: { id: string } };
  print(`-> the banned proxy is skipped for ${TARGET}: this lease went to ${l2.proxy.id}`);
  print(`-> the second proxy reports rate_limited on ${TARGET} too:`);
  const rateLimited = { result: 'rate_limited', target: TARGET };
  print(curl(env, 'POST', `/v1/leases/${l2.leaseID}/report`, rateLimited));
  const report2 = await api(env, 'POST', `/v1/leases/${l2.leaseID}/report`, rateLimited);
  answer(print, report2.status, report2.text);
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  let lease3 = await api(env, 'POST', '/v1/leases', leaseBody);
  answer(print, lease3.status, lease3.text);
  // More proxies (`--proxies`): each next one reports rate_limited too, until none is left.
  const moreLeases: string[] = [];
  while (lease3.status === 201 && moreLeases.length < proxies.length) {
    const id = (lease3.json as { leaseID: string }).leaseID;
    moreLeases.push(id);
    print('-> and this one reports rate_limited too:');
    print(curl(env, 'POST', `/v1/leases/${id}/report`, rateLimited));
    const r = await api(env, 'POST', `/v1/leases/${id}/report`, rateLimited);
    answer(print, r.status, r.text);
    print(curl(env, 'POST', '/v1/leases', leaseBody));
    lease3 = await api(env, 'POST', '/v1/leases', leaseBody);
    answer(print, lease3.status, lease3.text);
  }

  // A lease already ended answers 404 lease_not_found (docs/api.md): the second DELETE shows it.
  print('\n== 7. Release the leases (204; the same lease again: 404 lease_not_found, it has ended) ==');
  const releaseStatuses: number[] = [];
  for (const id of [l1.leaseID, l1.leaseID, l2.leaseID, ...moreLeases]) {
    print(curl(env, 'DELETE', `/v1/leases/${id}`));
    const r = await api(env, 'DELETE', `/v1/leases/${id}`);
    releaseStatuses.push(r.status);
    answer(print, r.status, r.text);
  }

  print(
    '\n== 8. Or use ONE proxy URL: the gateway leases, sticks a session, retries, reports bans (docs/gateway.md) ==',
  );
  const gatewayURL = `http://session-demo1:${env.gateway.token}@${env.gateway.address}`;
  print(`$ curl -s --noproxy '' -x '${gatewayURL}' ${env.target.exitIPURL}${STATUS_LINE}`);
  const gatewayAgent = new ProxyAgent(gatewayURL);
  const viaGateway = await request(env.target.exitIPURL, { dispatcher: gatewayAgent });
  const gatewayBody = await viaGateway.body.text();
  await gatewayAgent.close();
  answer(print, viaGateway.statusCode, gatewayBody.trimEnd());
  print(
    `-> the password is a discovery API token; the username carries the options (session-demo1 keeps this exit IP)`,
  );

  // The gateway keeps a finished lease for its idle time (2 s in the demo) for the next
  // request with the same options; wait it out so the demo hands over a fleet with no lease
  // held (the recipes' tests count leases after their crawl).
  print('-> the gateway releases its lease once idle (2 s here)');
  await waitForNoLeases(env, 15_000);

  const site = env.options.site ? await strictSite(env, print, exitIPs) : undefined;

  return {
    ...(site ? { site } : {}),
    gatewayStatus: viaGateway.statusCode,
    gatewayBody,
    ready: names,
    listed,
    leasedProxy: l1.proxy.id,
    fetchedStatus: page.statusCode,
    fetchedBody,
    afterBanLeasedProxy: l2.proxy.id,
    allCoolingDownStatus: lease3.status,
    allCoolingDownError: (lease3.json as { error?: string }).error ?? '',
    releaseStatuses,
    exitIPs,
  };
}

/** status.exitIP of every proxy, once all have one (written right after their first probe). */
async function waitForExitIPs(
  kc: KubeConfig,
  names: string[],
  timeoutMs: number,
): Promise<Record<string, string>> {
  const objects = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found: Record<string, string> = {};
    for (const name of names) {
      const p = (await objects.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: PLURAL,
        name,
      })) as Proxy;
      if (p.status?.exitIP) found[name] = p.status.exitIP;
    }
    if (Object.keys(found).length === names.length) return found;
    if (Date.now() > deadline)
      throw new Error(`no exit IP within ${timeoutMs / 1000} s: ${JSON.stringify(found)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

/** GET through a proxy URL (credentials in it): the status, the body and Retry-After. */
async function viaProxy(
  proxyURL: string,
  url: string,
  agent = new ProxyAgent(proxyURL),
): Promise<{ status: number; body: string; retryAfter: string }> {
  const res = await request(url, { dispatcher: agent });
  const body = await res.body.text();
  const retryAfter = res.headers['retry-after'];
  return { status: res.statusCode, body, retryAfter: typeof retryAfter === 'string' ? retryAfter : '' };
}

/**
 * Step 9 (`--site`): the site bans demo-external's exit and rate-limits each exit. A client
 * leases with the site as its target, reports the ban and the rate limit, and the book
 * steers it away: what a crawler under test should do.
 */
async function strictSite(
  env: DemoEnvironment,
  print: Print,
  exitIPs: Record<string, string>,
): Promise<SiteSummary> {
  const rate = env.options.site!.ratePerSecond;
  const bannedName = 'demo-external';
  const bannedExit = exitIPs[bannedName];
  const sharing = Object.entries(exitIPs).filter(([n, ip]) => n !== bannedName && ip === bannedExit);
  if (sharing.length > 0)
    throw new Error(
      `the banned exit ${bannedExit} is also the exit of ${sharing.map(([n]) => n).join(', ')}`,
    );
  env.site.ban(bannedExit);
  print(
    `\n== 9. The strict site ${env.site.url} (--site): 403 to ${bannedName} (exit ${bannedExit}), 429 with Retry-After above ${rate} requests per second per exit ==`,
  );
  const target = new URL(env.site.url).hostname;
  const leaseBody = { selector: { geo: 'local' }, ttlSeconds: 300, target };
  const statuses: Record<string, number> = {};
  const held: Array<{ leaseID: string; proxy: { id: string; url: string } }> = [];

  const count = Object.keys(exitIPs).length;
  // Leases are held, so least-loaded first walks through every proxy.
  for (let i = 0; i < 3 * count && Object.keys(statuses).length < count; i++) {
    print(curl(env, 'POST', '/v1/leases', leaseBody));
    const lease = await api(env, 'POST', '/v1/leases', leaseBody);
    answer(print, lease.status, lease.text);
    if (lease.status !== 201) break;
    const l = lease.json as { leaseID: string; proxy: { id: string; url: string } };
    held.push(l);
    if (statuses[l.proxy.id] !== undefined) continue;
    print(`$ curl -s --noproxy '' -x '${l.proxy.url}' ${env.site.url}${STATUS_LINE}`);
    const got = await viaProxy(l.proxy.url, env.site.url);
    answer(print, got.status, got.body.trimEnd());
    statuses[l.proxy.id] = got.status;
    if (got.status === 403) {
      print(`-> banned: report it, and ${l.proxy.id} rests for ${target}`);
      const banned = { result: 'banned', target };
      print(curl(env, 'POST', `/v1/leases/${l.leaseID}/report`, banned));
      const r = await api(env, 'POST', `/v1/leases/${l.leaseID}/report`, banned);
      answer(print, r.status, r.text);
    }
  }
  const ok = held.find((l) => statuses[l.proxy.id] === 200);
  if (!ok) throw new Error(`no proxy got a 200 from the strict site: ${JSON.stringify(statuses)}`);
  const n = rate + 2;
  print(
    `\n-> ${n} requests back to back through ${ok.proxy.id}: above ${rate} per second the site answers 429`,
  );
  print(
    `$ for i in $(seq ${n}); do curl -s -o /dev/null -w '%{http_code} ' --noproxy '' -x '${ok.proxy.url}' ${env.site.url}; done; echo`,
  );
  const agent = new ProxyAgent(ok.proxy.url);
  const burst: number[] = [];
  let retryAfter = '';
  try {
    for (let i = 0; i < n; i++) {
      const got = await viaProxy(ok.proxy.url, env.site.url, agent);
      burst.push(got.status);
      if (got.status === 429) retryAfter = got.retryAfter;
    }
  } finally {
    await agent.close();
  }
  print(burst.join(' '));
  print(
    `-> the 429 says Retry-After: ${retryAfter}; report it with retryAfterSeconds and the proxy rests that long`,
  );
  const limited = { result: 'rate_limited', target, retryAfterSeconds: Number(retryAfter) || 1 };
  print(curl(env, 'POST', `/v1/leases/${ok.leaseID}/report`, limited));
  const r = await api(env, 'POST', `/v1/leases/${ok.leaseID}/report`, limited);
  answer(print, r.status, r.text);
  const reportStatus = r.status;
  const releaseStatuses: number[] = [];
  for (const l of held) {
    print(curl(env, 'DELETE', `/v1/leases/${l.leaseID}`));
    const d = await api(env, 'DELETE', `/v1/leases/${l.leaseID}`);
    releaseStatuses.push(d.status);
    answer(print, d.status, d.text);
  }
  return {
    bannedProxy: `${NAMESPACE}/${bannedName}`,
    bannedExit,
    statuses,
    burst,
    retryAfter,
    reportStatus,
    releaseStatuses,
  };
}

/** Until no proxy has a live lease (the gateway's idle one released), or an error at the deadline. */
async function waitForNoLeases(env: DemoEnvironment, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await api(env, 'GET', '/v1/proxies');
    const items = (list.json as { items?: Array<{ activeLeases: number }> }).items ?? [];
    if (list.status === 200 && items.every((p) => p.activeLeases === 0)) return;
    if (Date.now() > deadline)
      throw new Error(`leases still held ${timeoutMs / 1000} s after step 8: ${list.status} ${list.text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

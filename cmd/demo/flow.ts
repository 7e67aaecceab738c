import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { ProxyAgent, request } from 'undici';
import { API_VERSION, GROUP, KIND, PLURAL, VERSION, type Proxy } from '../../crds/proxy-types.js';
import type { DemoEnvironment } from './environment.js';

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
  };
  return [
    {
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: { name: 'demo-managed', namespace: NAMESPACE },
      spec: {
        mode: 'Managed',
        provider: 'mock',
        port: 3128,
        maxLeases: 5,
        attributes: { geo: 'local', purpose: 'demo' },
        placement: { region: 'local', zone: 'local-a', machineType: 'e2-micro', image: 'squid' },
        cloudInit: { inline: '#cloud-config\npackages: [squid]\n' },
        healthCheck,
      },
    },
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
      },
    },
  ];
}

async function api(
  env: DemoEnvironment,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const res = await request(`${env.discoveryURL}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, json: text ? JSON.parse(text) : undefined };
}

function curl(env: DemoEnvironment, method: string, path: string, body?: unknown): string {
  const data = body === undefined ? '' : ` -d '${JSON.stringify(body)}'`;
  const m = method === 'GET' ? '' : ` -X${method}`;
  return `$ curl -s${m} '${env.discoveryURL}${path}'${data}`;
}

async function waitForReady(kc: KubeConfig, names: string[], print: Print, timeoutMs: number): Promise<void> {
  const client = kc.makeApiClient(CustomObjectsApi);
  const seen = new Map<string, string>();
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    let ready = 0;
    for (const name of names) {
      const p = (await client.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: NAMESPACE,
        plural: PLURAL,
        name,
      })) as Proxy;
      const phase = p.status?.phase ?? '-';
      if (seen.get(name) !== phase) {
        seen.set(name, phase);
        print(`  ${name.padEnd(14)} ${p.spec.mode.padEnd(9)} ${phase.padEnd(13)} ${p.status?.ip ?? ''}`);
      }
      if (phase === 'Ready') ready++;
    }
    if (ready === names.length) return;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(
    `proxies not Ready within ${timeoutMs / 1000} s: ${[...seen].map(([n, p]) => `${n}=${p}`).join(', ')}`,
  );
}

/** The demo's scripted walk through the product, printing what a person would type. */
export async function runDemoFlow(env: DemoEnvironment, print: Print, kubectl: string): Promise<DemoSummary> {
  const kc = env.kubeConfig;
  const objects = kc.makeApiClient(CustomObjectsApi);
  const k = `${kubectl} --kubeconfig ${env.controlPlane.kubeconfigPath}`;

  print('\n== 1. Apply two Proxy resources: one Managed by the mock provider, one External ==');
  print(
    `$ ${k} apply -f - <<EOF   (demo-managed: mode Managed, provider mock; demo-external: mode External, endpoint ${env.externalProxy.host}:${env.externalProxy.port})`,
  );
  for (const p of sampleProxies(env)) {
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
  print(`  ${'NAME'.padEnd(14)} ${'MODE'.padEnd(9)} ${'PHASE'.padEnd(13)} IP`);
  const names = ['demo-managed', 'demo-external'];
  await waitForReady(kc, names, print, 90_000);

  print('\n== 3. List healthy proxies through the discovery API ==');
  print(curl(env, 'GET', '/v1/proxies?healthy=true&attr.geo=local'));
  const list = await api(env, 'GET', '/v1/proxies?healthy=true&attr.geo=local');
  print(JSON.stringify(list.json, null, 2));
  const listed = ((list.json as { items?: unknown[] }).items ?? (list.json as unknown[])).length;

  print('\n== 4. Lease one (least-loaded first) ==');
  const leaseBody = { selector: { geo: 'local' }, ttlSeconds: 300, target: TARGET };
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  const lease1 = await api(env, 'POST', '/v1/leases', leaseBody);
  print(JSON.stringify(lease1.json, null, 2));
  const l1 = lease1.json as { leaseID: string; proxy: { id: string; ip: string; port: number } };

  print('\n== 5. Fetch a page THROUGH the leased proxy ==');
  print(`$ curl -s -x http://${l1.proxy.ip}:${l1.proxy.port} ${env.target.url}`);
  const agent = new ProxyAgent(`http://${l1.proxy.ip}:${l1.proxy.port}`);
  const page = await request(env.target.url, { dispatcher: agent });
  const fetchedBody = await page.body.text();
  await agent.close();
  print(`${page.statusCode} ${fetchedBody.trim()}`);

  print(`\n== 6. Report a ban on ${TARGET}: that proxy now cools down for that target ==`);
  print(curl(env, 'POST', `/v1/leases/${l1.leaseID}/report`, { result: 'banned', target: TARGET }));
  const report = await api(env, 'POST', `/v1/leases/${l1.leaseID}/report`, {
    result: 'banned',
    target: TARGET,
  });
  print(`${report.status} ${report.json === undefined ? '' : JSON.stringify(report.json)}`);
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  const lease2 = await api(env, 'POST', '/v1/leases', leaseBody);
  print(JSON.stringify(lease2.json, null, 2));
  const l2 = lease2.json as { leaseID: string; proxy: { id: string } };
  print(`-> the banned proxy is skipped for ${TARGET}: this lease went to ${l2.proxy.id}`);
  await api(env, 'POST', `/v1/leases/${l2.leaseID}/report`, { result: 'rate_limited', target: TARGET });
  print(`(the second proxy reports rate_limited on ${TARGET} too)`);
  print(curl(env, 'POST', '/v1/leases', leaseBody));
  const lease3 = await api(env, 'POST', '/v1/leases', leaseBody);
  print(`${lease3.status} ${JSON.stringify(lease3.json)}`);

  print('\n== 7. Release the leases (idempotent: 204 both times) ==');
  const releaseStatuses: number[] = [];
  for (const id of [l1.leaseID, l1.leaseID, l2.leaseID]) {
    print(curl(env, 'DELETE', `/v1/leases/${id}`));
    const r = await api(env, 'DELETE', `/v1/leases/${id}`);
    releaseStatuses.push(r.status);
    print(`${r.status}`);
  }

  return {
    ready: names,
    listed,
    leasedProxy: l1.proxy.id,
    fetchedStatus: page.statusCode,
    fetchedBody,
    afterBanLeasedProxy: l2.proxy.id,
    allCoolingDownStatus: lease3.status,
    allCoolingDownError: (lease3.json as { error?: string }).error ?? '',
    releaseStatuses,
  };
}

// Issue 25 item 4: the alerts and the dashboard against a real Prometheus (Debian's package,
// started here on loopback with a scratch TSDB) scraping a real operator process. Proxies
// die, and the too-few-healthy alert fires; every dashboard query returns series; a deleted
// proxy's probe series leave /metrics.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse, stringify } from 'yaml';
import { MONITORING_DIR, RULES_FILE } from '../../charts/app.js';
import { METRICS_JOB } from '../../charts/monitoring/alert-rules.js';
import { dashboardQueries } from '../../charts/monitoring/grafana-dashboard.js';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { createNamespace, deleteProxy, fastHealthCheck } from '../handlers/operator-fixture.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { readyz, runOperatorIn, scrape, until, type OperatorProcess } from '../harness/operator-process.js';
import { TestForwardProxy } from '../health/forward-proxy.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const kc = testKubeConfig();
const namespace = uniqueName('prom');
const api = new ProxyApi(kc, namespace);
/** The rules run here as shipped, except that every `for:` is this short (promtool tests the real ones). */
const SHORT_FOR = '3s';

let dir: string;
let target: LocalTarget;
let operator: OperatorProcess;
let prometheus: ChildProcess;
let promOutput = '';
let metricsPort: number;
let discoveryPort: number;
let promPort: number;
const exits: TestForwardProxy[] = [];

interface Sample {
  metric: Record<string, string>;
}
interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}

async function promGet<T>(path: string): Promise<T> {
  const res = await request(`http://127.0.0.1:${promPort}${path}`);
  const body = (await res.body.json()) as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? body.status}`);
  return body.data;
}

async function query(expr: string): Promise<Sample[]> {
  return (await promGet<{ result: Sample[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`)).result;
}

async function alerts(name: string): Promise<Alert[]> {
  return (await promGet<{ alerts: Alert[] }>('/api/v1/alerts')).alerts.filter(
    (a) => a.labels.alertname === name,
  );
}

async function discovery(method: 'POST' | 'DELETE', path: string, body?: unknown) {
  const res = await request(`http://127.0.0.1:${discoveryPort}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proxy-operator-prometheus-'));
  [metricsPort, discoveryPort, promPort] = [await freePort(), await freePort(), await freePort()];
  await installProxyCrd(kc);
  await createNamespace(kc, namespace);
  target = await startLocalTarget();
  for (let i = 0; i < 3; i++) exits.push(await TestForwardProxy.start('healthy'));

  // mock: fast instances with real forward proxies, its first two creates failing (provider
  // errors); mock-slow: an instance that stays Provisioning (the provisioning panel and gauge).
  const providers = join(dir, 'providers.yaml');
  await writeFile(
    providers,
    stringify({
      providers: [
        {
          name: 'mock',
          type: 'mock',
          mock: {
            provisioningSeconds: 1,
            serveTraffic: true,
            faults: { create: { kind: 'transient', count: 2 } },
          },
        },
        { name: 'mock-slow', type: 'mock', mock: { provisioningSeconds: 3600 } },
      ],
      // The External exits are forward proxies on loopback: allowed explicitly.
      external: { allowEndpointRanges: ['loopback'] },
    }),
  );
  ({ process: operator } = await runOperatorIn(namespace, {
    metricsPort,
    discoveryPort,
    flags: ['--providers-config', providers, '--log-level', 'warn'],
    env: { POD_NAME: 'prometheus-test' },
  }));

  // The shipped rules, `for:` shortened.
  const rules = parse(await readFile(join(ROOT, 'dist', MONITORING_DIR, RULES_FILE), 'utf8')) as {
    groups: Array<{ rules: Array<{ for: string }> }>;
  };
  for (const group of rules.groups) for (const rule of group.rules) rule.for = SHORT_FOR;
  await writeFile(join(dir, 'rules.yaml'), stringify(rules));
  await writeFile(
    join(dir, 'prometheus.yaml'),
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [join(dir, 'rules.yaml')],
      scrape_configs: [
        { job_name: METRICS_JOB, static_configs: [{ targets: [`127.0.0.1:${metricsPort}`] }] },
      ],
    }),
  );
  prometheus = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yaml')}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  prometheus.on('error', (err) => (promOutput += `\n${String(err)}`));
  for (const stream of [prometheus.stdout!, prometheus.stderr!])
    stream.on('data', (b: Buffer) => (promOutput = (promOutput + b.toString()).slice(-32_768)));

  await until('the operator to be ready', () => readyz(metricsPort), 90_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${operator.output()}`);
  });
  await until(
    'prometheus to be ready',
    async () => {
      const res = await request(`http://127.0.0.1:${promPort}/-/ready`);
      await res.body.dump();
      return res.statusCode === 200 ? true : undefined;
    },
    30_000,
  ).catch((err: Error) => {
    throw new Error(
      `${err.message} (is Debian's prometheus package installed? .ci/run installs it)\n${promOutput}`,
    );
  });

  for (const [i, exit] of exits.entries()) {
    await api.create(`exit-${i}`, {
      spec: {
        mode: 'External',
        endpoint: { host: '127.0.0.1', port: exit.port },
        attributes: { geo: 'eu' },
        healthCheck: fastHealthCheck(target),
      },
    });
  }
  const managed = (provider: string, geo: string) => ({
    spec: {
      mode: 'Managed',
      provider,
      placement: { zone: 'local-a', machineType: 'small', image: 'squid-1' },
      attributes: { geo },
      healthCheck: fastHealthCheck(target),
    },
  });
  await api.create('managed', managed('mock', 'mock'));
  await api.create('slow', managed('mock-slow', 'slow'));
}, 180_000);

afterAll(async () => {
  prometheus?.kill('SIGTERM');
  operator?.child.kill('SIGTERM');
  await operator?.exited;
  await Promise.all([...exits.map((e) => e.close()), target?.close()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ready = async (name: string) => ((await api.get(name)).status?.phase === 'Ready' ? true : undefined);

describe('a real Prometheus scraping a real operator', () => {
  it('scrapes it, and evaluates every rule without error', async () => {
    await until('the scrape to succeed', async () => {
      const up = await query(`up{job="${METRICS_JOB}"} == 1`);
      return up.length === 1 ? true : undefined;
    });
    await until('every rule to be evaluated', async () => {
      const { groups } = await promGet<{
        groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }>;
      }>('/api/v1/rules');
      const rules = groups.flatMap((g) => g.rules);
      const bad = rules.filter((r) => r.health !== 'ok');
      if (bad.length > 0) throw new Error(`rules not ok: ${JSON.stringify(bad)}`);
      return rules.length > 0 ? true : undefined;
    });
  });

  it('the too-few-healthy alert stays quiet while the pool is healthy, and fires when its proxies die', async () => {
    for (const name of ['exit-0', 'exit-1', 'exit-2', 'managed'])
      await until(`${name} Ready`, () => ready(name));
    const eu = `{namespace="${namespace}",attributes="geo=eu",phase="Ready"}`;
    await until('Prometheus to see the pool healthy', async () => {
      const [sample] = await query(`proxy_operator_pool_proxies${eu}`);
      return sample && (sample as Sample & { value: [number, string] }).value[1] === '3' ? true : undefined;
    });
    // Several evaluations with the pool healthy: neither pending nor firing.
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await alerts('ProxyPoolNoHealthyProxies')).toEqual([]);
    expect(await alerts('ProxyPoolFewHealthyProxies')).toEqual([]);

    // Traffic for the lease, report and session panels while the pool still serves.
    const granted = await discovery('POST', '/v1/leases', {
      selector: { geo: 'eu' },
      ttlSeconds: 60,
      session: 'crawl-1',
    });
    expect(granted.status).toBe(201);
    const refused = await discovery('POST', '/v1/leases', { selector: { geo: 'nowhere' } });
    expect(refused).toMatchObject({ status: 409, body: { error: 'no_match' } });
    const report = await discovery('POST', `/v1/leases/${String(granted.body.leaseID)}/report`, {
      result: 'banned',
      target: 'shop.example',
    });
    expect(report.status).toBe(200);

    for (const exit of exits) exit.mode = 'cannot-egress';
    const firing = await until(
      'ProxyPoolNoHealthyProxies to fire',
      async () => {
        const found = (await alerts('ProxyPoolNoHealthyProxies')).filter((a) => a.state === 'firing');
        return found.length > 0 ? found : undefined;
      },
      60_000,
    );
    expect(firing).toEqual([
      expect.objectContaining({
        labels: expect.objectContaining({
          alertname: 'ProxyPoolNoHealthyProxies',
          namespace,
          attributes: 'geo=eu',
          severity: 'critical',
        }) as unknown,
      }),
    ]);
    // The other pools still serve: only geo=eu is named.
    expect((await api.get('managed')).status?.phase).toBe('Ready');
  }, 120_000);

  it('every query of the dashboard returns series', async () => {
    const queries = dashboardQueries().map((q) => q.replaceAll('$__rate_interval', '1m'));
    const empty = await until(
      'every dashboard query to return series',
      async () => {
        const results = await Promise.all(queries.map(async (q) => [q, (await query(q)).length] as const));
        const missing = results.filter(([, n]) => n === 0).map(([q]) => q);
        return missing.length === 0 ? missing : undefined;
      },
      60_000,
    ).catch(async (err: Error) => {
      const missing: string[] = [];
      for (const q of queries) if ((await query(q)).length === 0) missing.push(q);
      throw new Error(`${err.message}; empty: ${JSON.stringify(missing, null, 2)}`);
    });
    expect(empty).toEqual([]);
    expect(queries.length).toBeGreaterThan(15);
  });

  it('a deleted proxy’s probe series leave /metrics (the `proxy` label does not accumulate)', async () => {
    const key = `proxy="${namespace}/exit-2"`;
    const series = async () =>
      (await scrape(metricsPort))
        .split('\n')
        .filter((l) => l.includes(key) && l.startsWith('proxy_operator_healthcheck_'));
    // exit-2 has been probed (and has failed) by now: duration and failure series.
    expect(
      (await series()).some((l) => l.startsWith('proxy_operator_healthcheck_duration_seconds_bucket')),
    ).toBe(true);
    expect((await series()).some((l) => l.startsWith('proxy_operator_healthcheck_failures_total'))).toBe(
      true,
    );
    await deleteProxy(kc, namespace, 'exit-2');
    await until(
      'exit-2’s series to go',
      async () => ((await series()).length === 0 ? true : undefined),
      30_000,
    );
    expect(await series()).toEqual([]);
    // The others keep theirs.
    expect(await scrape(metricsPort)).toContain(`proxy="${namespace}/exit-1"`);
  });
});

// Issue 47 item 6: monitoring counts each thing once in every shipped topology. One fleet and
// one Redis book, scraped by a real Prometheus twice: first as one all-in-one process (as
// dist/operator.yaml runs it: controller, discovery and gateway), then as
// dist/operator-redis.yaml runs it (a controller, two discovery-only and two gateway-only
// replicas, all in the metrics job; issue 46 item 4). The fleet's and the book's sums, and every alert expression that reads gauges,
// must come out the same; and with the controller gone, "no replica leads" must be visible.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { parse, stringify } from 'yaml';
import { MONITORING_DIR, RULES_FILE } from '../../charts/app.js';
import { METRICS_JOB } from '../../charts/monitoring/alert-rules.js';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { createNamespace, fastHealthCheck } from '../handlers/operator-fixture.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  LOOPBACK_PROVIDERS_CONFIG,
  runOperatorIn,
  untilReady,
  until,
  type ServingOperator,
} from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { TestForwardProxy } from '../health/forward-proxy.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const kc = testKubeConfig();
const namespace = uniqueName('ha-mon');
const api = new ProxyApi(kc, namespace);

let dir: string;
let target: LocalTarget;
let redis: RedisServer;
const exits: TestForwardProxy[] = [];
const processes: ServingOperator[] = [];
const prometheuses: ChildProcess[] = [];

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** The gauge sums a dashboard or an alert builds on: each must count each thing once. */
const SUMS = [
  'sum(proxy_operator_proxies)',
  'sum by (phase) (proxy_operator_proxies)',
  'sum by (attributes, phase) (proxy_operator_pool_proxies)',
  'sum(proxy_operator_leases_active)',
  'sum(proxy_operator_sessions_active)',
  'sum(proxy_operator_cooldowns_active)',
  'sum(proxy_operator_suspect_proxies)',
  `sum(operator_framework_is_leader{job="${METRICS_JOB}"})`,
];

async function startPrometheus(name: string, targets: number[]): Promise<number> {
  const port = await freePort();
  const rules = parse(await readFile(join(ROOT, 'dist', MONITORING_DIR, RULES_FILE), 'utf8')) as object;
  await writeFile(join(dir, `${name}-rules.yaml`), stringify(rules));
  await writeFile(
    join(dir, `${name}.yaml`),
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [join(dir, `${name}-rules.yaml`)],
      scrape_configs: [
        { job_name: METRICS_JOB, static_configs: [{ targets: targets.map((p) => `127.0.0.1:${p}`) }] },
      ],
    }),
  );
  const prom = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, `${name}.yaml`)}`,
      `--storage.tsdb.path=${join(dir, `${name}-tsdb`)}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  prometheuses.push(prom);
  await until('prometheus ready', async () => {
    const res = await request(`http://127.0.0.1:${port}/-/ready`);
    await res.body.dump();
    return res.statusCode === 200 ? true : undefined;
  });
  return port;
}

async function query(port: number, expr: string): Promise<Sample[]> {
  const res = await request(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await res.body.json()) as { status: string; data: { result: Sample[] }; error?: string };
  if (body.status !== 'success') throw new Error(`${expr}: ${body.error ?? body.status}`);
  return body.data.result;
}

/** A result as comparable text: labels (but the scraped process's own) and value, sorted. */
async function evaluate(port: number, expr: string): Promise<string[]> {
  return (await query(port, expr))
    .map(({ metric, value }) => {
      const { instance: _instance, ...labels } = metric;
      return `${JSON.stringify(labels)} ${value[1]}`;
    })
    .sort();
}

/** The shipped alert expressions that read gauges only (a rate's window depends on history). */
async function gaugeAlertExpressions(): Promise<Array<[string, string]>> {
  const rules = parse(await readFile(join(ROOT, 'dist', MONITORING_DIR, RULES_FILE), 'utf8')) as {
    groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
  };
  return rules.groups
    .flatMap((g) => g.rules)
    .filter((r) => !/\b(rate|increase)\(/.test(r.expr))
    .map((r) => [r.alert, r.expr]);
}

async function snapshot(port: number, exprs: string[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const expr of exprs) out[expr] = await evaluate(port, expr);
  return out;
}

function operatorFlags(components: string): string[] {
  return [
    `--components=${components}`,
    '--lease-store=redis',
    '--redis-url',
    redis.url,
    '--log-level',
    'warn',
    '--providers-config',
    LOOPBACK_PROVIDERS_CONFIG,
  ];
}

async function start(name: string, components: string): Promise<ServingOperator> {
  const op = await runOperatorIn(namespace, { flags: operatorFlags(components), env: { POD_NAME: name } });
  processes.push(op);
  await untilReady(op);
  return op;
}

async function stop(op: ServingOperator): Promise<void> {
  op.process.child.kill('SIGTERM');
  await op.process.exited;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'proxy-operator-ha-mon-'));
  await installProxyCrd(kc);
  await createNamespace(kc, namespace);
  target = await startLocalTarget();
  redis = await startRedisServer();
  for (let i = 0; i < 3; i++) exits.push(await TestForwardProxy.start('healthy'));
  for (const [i, exit] of exits.entries())
    await api.create(`exit-${i}`, {
      spec: {
        mode: 'External',
        endpoint: { host: '127.0.0.1', port: exit.port },
        attributes: { geo: 'eu' },
        healthCheck: fastHealthCheck(target),
      },
    });
  // A pool that never serves: the pool alerts have something to say.
  await api.create('dead', {
    spec: {
      mode: 'External',
      endpoint: { host: '127.0.0.1', port: await freePort() },
      attributes: { geo: 'dead' },
      healthCheck: fastHealthCheck(target),
    },
  });
}, 120_000);

afterAll(async () => {
  for (const p of prometheuses) p.kill('SIGTERM');
  for (const op of processes) op.process.child.kill('SIGKILL');
  await Promise.all([...exits.map((e) => e.close()), target?.close(), redis?.stop()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function lease(discoveryPort: number, body: Record<string, unknown>): Promise<string> {
  const res = await request(`http://127.0.0.1:${discoveryPort}/v1/leases`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.body.json()) as { leaseID?: string };
  if (res.statusCode !== 201) throw new Error(`lease: ${res.statusCode} ${JSON.stringify(json)}`);
  return json.leaseID!;
}

describe('monitoring in the split topology', () => {
  it('every sum and every gauge alert reads as it does for one process; no leader is visible', async () => {
    const alertExprs = await gaugeAlertExpressions();
    expect(alertExprs.map(([a]) => a)).toEqual(
      expect.arrayContaining(['ProxyPoolNoHealthyProxies', 'ProxyOperatorNoLeader', 'ProxyLeaseStoreDown']),
    );
    const exprs = [...SUMS, ...alertExprs.map(([, e]) => e)];

    // One process: the fleet settles, and the book gets two leases (one in a session) and a ban.
    const single = await start('single', 'controller,discovery,gateway');
    const singleProm = await startPrometheus('single', [single.metricsPort]);
    for (const name of ['exit-0', 'exit-1', 'exit-2'])
      await until(
        `${name} Ready`,
        async () => ((await api.get(name)).status?.phase === 'Ready' ? true : undefined),
        60_000,
      );
    await until(
      'dead Unhealthy',
      async () => ((await api.get('dead')).status?.phase === 'Unhealthy' ? true : undefined),
      60_000,
    );
    const first = await lease(single.discoveryPort, {
      selector: { geo: 'eu' },
      ttlSeconds: 3600,
      session: 's1',
    });
    await lease(single.discoveryPort, { selector: { geo: 'eu' }, ttlSeconds: 3600 });
    const banned = await request(`http://127.0.0.1:${single.discoveryPort}/v1/leases/${first}/report`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ result: 'banned', target: 'shop.example' }),
    });
    expect(banned.statusCode).toBe(200);
    await banned.body.dump();
    const one = await until(
      'one process to be scraped with the book and the fleet in it',
      async () => {
        const s = await snapshot(singleProm, exprs);
        return s['sum(proxy_operator_leases_active)'][0]?.endsWith(' 2') &&
          s['sum(proxy_operator_proxies)'][0]?.endsWith(' 4')
          ? s
          : undefined;
      },
      60_000,
    );
    expect(await evaluate(singleProm, 'count(proxy_operator_gateway_leases_held)')).toEqual(['{} 1']);
    await stop(single);

    // The same fleet and book as dist/operator-redis.yaml runs them.
    const controller = await start('controller', 'controller');
    const discoveryA = await start('discovery-a', 'discovery');
    const discoveryB = await start('discovery-b', 'discovery');
    const gatewayA = await start('gateway-a', 'gateway');
    const gatewayB = await start('gateway-b', 'gateway');
    const haProm = await startPrometheus('ha', [
      controller.metricsPort,
      discoveryA.metricsPort,
      discoveryB.metricsPort,
      gatewayA.metricsPort,
      gatewayB.metricsPort,
    ]);
    const three = await until(
      'the five processes to be scraped, the controller leading',
      async () => {
        if ((await query(haProm, `up{job="${METRICS_JOB}"} == 1`)).length !== 5) return undefined;
        const s = await snapshot(haProm, exprs);
        return JSON.stringify(s) === JSON.stringify(one) ? s : undefined;
      },
      90_000,
    ).catch(async () => snapshot(haProm, exprs));
    expect(three).toEqual(one);
    // The gateway's own series come from every gateway replica (the retry-storm alert's input).
    expect(await evaluate(haProm, 'count(proxy_operator_gateway_leases_held)')).toEqual(['{} 2']);

    // The controller goes: the discovery replicas serve on, and "no replica leads" shows.
    await stop(controller);
    const noLeader = alertExprs.find(([a]) => a === 'ProxyOperatorNoLeader')![1];
    await until(
      'the no-leader expression to hold with only discovery replicas scraped',
      async () => ((await query(haProm, noLeader)).length === 1 ? true : undefined),
      30_000,
    );
    expect(await evaluate(haProm, noLeader)).toEqual(['{} 0']);
  }, 300_000);
});

// The seam between the health engine and the lease book, on a real API server with the
// status writer (the reconciler) left out: what reaches discovery here reaches it through the
// book alone, as it must while status writes are impossible (an API-server outage).
import { CONDITION_HEALTHY } from '../../crds/proxy-types.js';
import type { LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { controller } from '../../framework/index.js';
import { DiscoveryRunner } from '../../handlers/discovery-runner.js';
import { PROXY_KIND } from '../../handlers/kinds.js';
import { HealthRunner } from '../../handlers/health-runner.js';
import { PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { DiscoveryApiError, DiscoveryClient } from '../../client/src/index.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { eventually, startOperator, suiteSetup, type RunningOperator } from './operator-fixture.js';

/** Keeps the Proxy informer of the left-out reconciler, and nothing else of it: no handler, no write. */
@controller({ ...PROXY_KIND })
class ProxyInformerOnly {}

const kc = testKubeConfig();
const namespace = uniqueName('seam');
let api: ProxyApi;
let target: LocalTarget;
let op: RunningOperator;
let client: DiscoveryClient;
const proxies: ForwardProxy[] = [];

beforeAll(async () => {
  ({ api, target } = await suiteSetup(kc, namespace));
  const port = await freePort();
  // No ProxyController: nobody writes status, so the Proxy stays "Ready, Healthy" whatever happens.
  op = await startOperator(
    kc,
    {},
    namespace,
    { discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, host: '127.0.0.1', port } },
    [ProxyInformerOnly, HealthRunner, DiscoveryRunner] as unknown as typeof PROXY_HANDLERS,
  );
  client = new DiscoveryClient({ baseUrl: `http://127.0.0.1:${port}` });
  for (const name of ['seam-a', 'seam-b']) {
    const fp = await startForwardProxy({ host: '127.0.0.1', port: await freePort() });
    proxies.push(fp);
    await api.create(name, {
      spec: {
        mode: 'External',
        endpoint: { host: fp.host, port: fp.port },
        maxLeases: 5,
        // One failure makes it Unhealthy; a 30 s schedule, so only a recheck probes soon.
        healthCheck: {
          probeURL: target.probeURL,
          intervalSeconds: 30,
          timeoutSeconds: 2,
          failureThreshold: 1,
        },
      },
    });
    await api.patchStatus(name, {
      phase: 'Ready',
      conditions: [
        {
          type: CONDITION_HEALTHY,
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'set by the test',
          lastTransitionTime: new Date().toISOString(),
          observedGeneration: 1,
        },
      ],
    });
  }
  await eventually('both listed healthy', async () =>
    (await client.listProxies({ healthy: true })).length === 2 ? true : undefined,
  );
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await Promise.all(proxies.map((p) => p.close()));
  await target?.close();
});

const leaseIDs = async (n: number) => {
  const got: string[] = [];
  for (let i = 0; i < n; i++) {
    try {
      const lease = await client.lease({ ttlSeconds: 60 });
      got.push(lease.proxy.id);
      await client.release(lease.leaseID);
    } catch (err) {
      if (!(err instanceof DiscoveryApiError)) throw err;
      got.push(err.code);
    }
  }
  return got;
};

it('an unreachable report holds the proxy out until the recheck it triggers passes, long before its schedule', async () => {
  const lease = await client.lease({ ttlSeconds: 60 });
  const reported = await client.report(lease.leaseID, 'unreachable');
  expect(reported.suspect).toBe(true);
  await client.release(lease.leaseID);
  // The proxy is alive: the recheck (not the 30 s schedule) passes within a second or two.
  const back = await eventually(
    'the suspicion ended by a recheck',
    async () => {
      const p = await client.getProxy(lease.proxy.id);
      return p.held === undefined ? p : undefined;
    },
    10_000,
  );
  expect(back.healthy).toBe(true);
  const rechecks = await op.registry.getSingleMetric('proxy_operator_healthcheck_rechecks_total')!.get();
  expect(rechecks.values[0].value).toBe(1);
});

it('a proxy the engine finds dead leaves the pool at once, though its status still says Healthy', async () => {
  // Two leases: the second lands on the other proxy (least loaded first), not the one the
  // first test just cleared (a report on it within the holdoff would not be believed).
  const first = await client.lease({ ttlSeconds: 60 });
  const lease = await client.lease({ ttlSeconds: 60 });
  await client.release(first.leaseID);
  const victim = proxies.find((p) => lease.proxy.port === p.port)!;
  await victim.close();
  await client.report(lease.leaseID, 'unreachable');
  await client.release(lease.leaseID);
  // The recheck fails once (failureThreshold 1): the verdict reaches the book as it happens.
  const held = await eventually(
    'held down',
    async () => {
      const p = await client.getProxy(lease.proxy.id);
      return p.held === 'down' ? p : undefined;
    },
    10_000,
  );
  // Nobody wrote the status: the record still says healthy; the book keeps it out all the same.
  expect(held.healthy).toBe(true);
  expect((await api.get(lease.proxy.id.split('/')[1])).status?.phase).toBe('Ready');
  const other = (await client.listProxies()).find((p) => p.id !== lease.proxy.id)!.id;
  expect(await leaseIDs(5)).toEqual(Array(5).fill(other));
});

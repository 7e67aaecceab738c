import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { freePort } from '../../framework/testing/control-plane.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  LeasePoller,
  LOOPBACK_PROVIDERS_CONFIG,
  runOperatorIn,
  scrape,
  until,
  untilReady,
  type OperatorProcess,
} from '../harness/operator-process.js';

// Issue 11 item 1: a restart or a leader change is invisible to crawlers. 20 Ready External
// proxies (real forward proxies on loopback), the real operator process, a crawler leasing all
// the while: no 409 caused by the change, and no Proxy write and no Event until the new
// leader's first probe interval is over.
const COUNT = 20;
const INTERVAL = 10;
const kc = testKubeConfig();
const namespace = uniqueName('restart');
const leaseName = 'restart-leader';
const api = new ProxyApi(kc, namespace);
const core = kc.makeApiClient(CoreV1Api);
const leases = kc.makeApiClient(CoordinationV1Api);
let target: LocalTarget;
const forwardProxies: ForwardProxy[] = [];
const running: OperatorProcess[] = [];

interface Replica {
  name: string;
  metrics: number;
  discovery: number;
  process: OperatorProcess;
}

async function start(name: string, discovery?: number): Promise<Replica> {
  const replica = await runOperatorIn(namespace, {
    flags: [
      '--leader-election-id',
      leaseName,
      '--log-level',
      'warn',
      '--providers-config',
      LOOPBACK_PROVIDERS_CONFIG,
    ],
    env: { POD_NAME: name },
    discoveryPort: discovery,
  });
  running.push(replica.process);
  await untilReady(replica);
  return { name, metrics: replica.metricsPort, discovery: replica.discoveryPort, process: replica.process };
}

/** The replica that holds the Lease: its POD_NAME, the prefix of its identity (cmd/leader-identity.ts). */
async function holder(): Promise<string> {
  const lease = await leases.readNamespacedLease({ name: leaseName, namespace });
  return /^(.+)_[0-9a-f]{12}$/.exec(lease.spec?.holderIdentity ?? '')?.[1] ?? '';
}

/** What a write would change: every Proxy's resourceVersion, and the Events in the namespace. */
async function snapshot(): Promise<{ versions: Record<string, string>; events: number }> {
  const versions = Object.fromEntries(
    (await api.list()).map((p) => [p.metadata.name, p.metadata.resourceVersion!]),
  );
  const events = (await core.listNamespacedEvent({ namespace })).items.length;
  return { versions, events };
}

/** Each proxy was probed by this replica at least once: its first probe interval is over. */
async function probedAll(replica: Replica): Promise<true | undefined> {
  const text = await scrape(replica.metrics);
  const probed = text
    .split('\n')
    .filter((l) => l.startsWith('proxy_operator_healthcheck_duration_seconds_count{') && !l.endsWith(' 0'));
  return probed.length >= COUNT ? true : undefined;
}

/**
 * Watches the new leader through its first probe interval: from the moment it holds the Lease,
 * one interval plus a margin for the verdicts to reach the reconciler.
 */
async function throughFirstInterval(next: Replica): Promise<void> {
  await until(`${next.name} leads`, async () => ((await holder()) === next.name ? true : undefined), 60_000);
  await new Promise((r) => setTimeout(r, (INTERVAL + 4) * 1000));
  await until(`${next.name} probed every proxy`, () => probedAll(next), 10_000);
}

beforeAll(async () => {
  await installProxyCrd(kc);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  target = await startLocalTarget();
  for (let i = 0; i < COUNT; i++) {
    const fp = await startForwardProxy({ host: '127.0.0.1', port: await freePort() });
    forwardProxies.push(fp);
    await api.create(`ext-${i}`, {
      spec: {
        mode: 'External',
        endpoint: { host: fp.host, port: fp.port },
        healthCheck: {
          probeURL: target.probeURL,
          intervalSeconds: INTERVAL,
          timeoutSeconds: 2,
          failureThreshold: 1,
        },
      },
    });
  }
});

afterAll(async () => {
  for (const p of running) p.child.kill('SIGKILL');
  await Promise.all(running.map((p) => p.exited));
  await Promise.all(forwardProxies.map((fp) => fp.close()));
  await target?.close();
});

describe('restarts and leader changes are invisible to crawlers', () => {
  let leader: Replica;
  const poller = new LeasePoller(() => [leader.discovery]);
  const handOver = new LeasePoller(() => poll.map((r) => r.discovery));
  let poll: Replica[] = [];

  afterAll(() => Promise.all([poller.stop(), handOver.stop()]));

  it('SIGKILL and a new process: no 409, no Proxy write and no Event in its first probe interval', async () => {
    leader = await start('replica-a');
    await until(
      `${COUNT} Ready`,
      async () =>
        (await api.list()).filter((p) => p.status?.phase === 'Ready').length === COUNT ? true : undefined,
      90_000,
    );
    poller.start();
    await until('a lease granted', async () => (poller.count('granted') > 0 ? true : undefined));
    const before = await snapshot();

    leader.process.child.kill('SIGKILL');
    await leader.process.exited;
    const grantedBefore = poller.count('granted');
    // Same discovery port, as a restarted Pod keeps its Service.
    leader = await start('replica-b', leader.discovery);
    await throughFirstInterval(leader);

    const after = await snapshot();
    process.stdout.write(
      `[restart] leases: ${JSON.stringify(Object.fromEntries(poller.counts))}; events ${before.events} → ${after.events}\n`,
    );
    expect(after.versions).toEqual(before.versions);
    expect(after.events).toBe(before.events);
    expect(poller.conflicts()).toBe(0);
    expect(poller.count('granted')).toBeGreaterThan(grantedBefore);
  }, 240_000);

  it('a leader hand-over between two replicas: the same', async () => {
    await poller.stop();
    const follower = await start('replica-c');
    poll = [leader, follower];
    handOver.start();
    expect(await holder()).toBe(leader.name);
    const before = await snapshot();
    // A rolling deploy: the leader is told to stop, releases the Lease, the follower takes over.
    leader.process.child.kill('SIGTERM');
    expect(await leader.process.exited).toBe(0);
    const grantedBefore = handOver.count('granted');
    poll.shift();
    await throughFirstInterval(follower);

    const after = await snapshot();
    process.stdout.write(`[hand-over] leases: ${JSON.stringify(Object.fromEntries(handOver.counts))}\n`);
    expect(after.versions).toEqual(before.versions);
    expect(after.events).toBe(before.events);
    expect(handOver.conflicts()).toBe(0);
    expect(handOver.count('granted')).toBeGreaterThan(grantedBefore);
  }, 240_000);
});

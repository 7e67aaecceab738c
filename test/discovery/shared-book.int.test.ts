// One lease book for every replica: three real operator processes (`--components=discovery
// --lease-store=redis`) against the real API server, sharing one real redis-server. What a
// crawler sees through any of them is one book: caps hold across processes, a SIGKILL or a
// restart of every process loses no lease, session or cooldown, and an old and a new process
// serving side by side (a rolling update) never overfill a proxy or lease one cooling down.
import { CoreV1Api } from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { KUBECONFIG_ENV, testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, until, type OperatorProcess } from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';

const kc = testKubeConfig();
const namespace = uniqueName('shared-book');
const TARGET = 'shop.example';
/** name → maxLeases; latency grows with the index, so `p0` is everyone's first choice. */
const FLEET: [string, number][] = [
  ['p0', 1],
  ['p1', 2],
  ['p2', 3],
  ['p3', 4],
  ['p4', 5],
  ['p5', 5],
];
const CAPS = new Map(FLEET.map(([name, max]) => [`${namespace}/${name}`, max]));
const agent = new Agent({ connections: 64 });

/** Proxies banned for TARGET so far (cooldowns of 15 min: they outlast the suite). */
const bannedForTarget = new Set<string>();
let redis: RedisServer;
let proxies: ProxyApi;

interface Replica {
  op: OperatorProcess;
  port: number;
  metrics: number;
}
const running: Replica[] = [];

async function startReplica(): Promise<Replica> {
  const [port, metrics] = [await freePort(), await freePort()];
  const op = runOperator([
    '--kubeconfig',
    process.env[KUBECONFIG_ENV]!,
    '--watch-namespace',
    namespace,
    '--components=discovery',
    '--lease-store=redis',
    `--redis-url=${redis.url}`,
    `--redis-key-prefix=${namespace}`,
    // What the shared book answers is under test, not how fast: a loaded CI machine must not
    // turn a slow reply into a 503 (the production deadline is tested in redis-lease-store).
    '--redis-timeout=15000',
    '--metrics-address',
    `127.0.0.1:${metrics}`,
    '--discovery-address',
    `127.0.0.1:${port}`,
    '--log-level=warn',
    // The book is under test, not the per-token rate limit: these loops send well above it.
    '--discovery-rate-limit=1000000',
    '--discovery-rate-burst=1000000',
  ]);
  const replica = { op, port, metrics };
  running.push(replica);
  // Ready when it serves every proxy as healthy (its cache has caught up with the statuses).
  await until(
    `replica on :${port} serving the fleet`,
    async () => {
      const res = await call(port, 'GET', '/v1/proxies?healthy=true');
      const items = (res.body as { items?: unknown[] }).items;
      return res.status === 200 && items?.length === FLEET.length ? true : undefined;
    },
    90_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${op.output()}`);
  });
  return replica;
}

async function stopReplica(replica: Replica, signal: NodeJS.Signals): Promise<void> {
  replica.op.child.kill(signal);
  await replica.op.exited;
  running.splice(running.indexOf(replica), 1);
}

async function call(port: number, method: string, path: string, body?: unknown) {
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    method: method as 'GET',
    dispatcher: agent,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 10_000,
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    body: (text === '' ? undefined : JSON.parse(text)) as Record<string, unknown>,
  };
}

interface Granted {
  leaseID: string;
  proxy: { id: string; activeLeases: number; maxLeases: number };
  target: string | null;
  session?: { key: string; moved: boolean };
}

/** Live leases by proxy, as every replica's /v1/proxies says. */
async function loads(port: number): Promise<Map<string, number>> {
  const res = await call(port, 'GET', '/v1/proxies');
  const items = (res.body as { items: { id: string; activeLeases: number }[] }).items;
  return new Map(items.map((p) => [p.id, p.activeLeases]));
}

beforeAll(async () => {
  redis = await startRedisServer();
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  proxies = new ProxyApi(kc, namespace);
  const now = new Date().toISOString();
  for (const [i, [name, maxLeases]] of FLEET.entries()) {
    await proxies.create(name, {
      spec: { mode: 'External', endpoint: { host: `127.0.0.${10 + i}`, port: 3128 }, maxLeases },
    });
    // No controller runs here: the test plays the health engine and writes the verdicts.
    await proxies.patchStatus(name, {
      phase: 'Ready',
      latencyMillis: 10 * (i + 1),
      conditions: [
        {
          type: 'Healthy',
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'test',
          lastTransitionTime: now,
        },
      ],
    });
  }
  for (let i = 0; i < 3; i++) await startReplica();
});

afterAll(async () => {
  for (const replica of [...running]) await stopReplica(replica, 'SIGKILL');
  await agent.close();
  await redis?.stop();
});

describe('three discovery processes sharing one Redis', () => {
  it('500 parallel mixed requests spread over the three (leases, releases, reports alone and batched with their release) never overfill a proxy, never bind a session twice, never lease a proxy cooling down for its target', async () => {
    const ports = running.map((r) => r.port);
    // Ban p0 (everyone's first choice) for TARGET, through the first replica.
    const first = await call(ports[0], 'POST', '/v1/leases', { target: TARGET, ttlSeconds: 600 });
    const banned = (first.body as unknown as Granted).proxy.id;
    expect(banned).toBe(`${namespace}/p0`);
    bannedForTarget.add(banned);
    await call(ports[0], 'POST', `/v1/leases/${(first.body as unknown as Granted).leaseID}/report`, {
      result: 'banned',
    });
    await call(ports[0], 'DELETE', `/v1/leases/${(first.body as unknown as Granted).leaseID}`);

    const live = new Map<string, Granted>();
    const violations: string[] = [];
    const statuses = new Map<number, number>();
    const lastProxy = new Map<string, string>();
    await Promise.all(
      Array.from({ length: 500 }, async (_, i) => {
        const port = ports[i % 3];
        const kind = i % 5;
        if (kind === 4 && live.size > 0) {
          const [id] = live.keys();
          live.delete(id);
          const res = await call(port, 'DELETE', `/v1/leases/${id}`);
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          return;
        }
        const session = kind === 3 ? `s${i % 7}` : undefined;
        const res = await call(port, 'POST', '/v1/leases', {
          ttlSeconds: 600,
          ...(kind % 2 === 0 ? { target: TARGET } : {}),
          ...(session === undefined ? {} : { session }),
        });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status !== 201) return;
        const lease = res.body as unknown as Granted;
        live.set(lease.leaseID, lease);
        if (lease.proxy.activeLeases > lease.proxy.maxLeases)
          violations.push(`${lease.proxy.id} at ${lease.proxy.activeLeases} > ${lease.proxy.maxLeases}`);
        if (lease.target === TARGET && lease.proxy.id === banned)
          violations.push(`${banned} leased for ${TARGET}`);
        if (session !== undefined) {
          const last = lastProxy.get(session);
          if (lease.session?.moved !== true && last !== undefined && last !== lease.proxy.id)
            violations.push(`session ${session} on ${lease.proxy.id} and ${last} without moving`);
          lastProxy.set(session, lease.proxy.id);
        }
        if (kind === 1 && i % 10 === 1) {
          await call(port, 'POST', `/v1/leases/${lease.leaseID}/report`, { result: 'ok' });
        } else if (kind === 1) {
          // The last report and the release in one call, in a batch, through another replica.
          const res = await call(ports[(i + 1) % 3], 'POST', '/v1/reports', {
            reports: [{ leaseID: lease.leaseID, result: 'ok', release: true }],
          });
          const [answer] = (res.body as { items: { released?: true; error?: string }[] }).items;
          // Released here, or (a concurrent DELETE got there first) already gone.
          if (res.status !== 200 || (answer.released !== true && answer.error !== 'lease_not_found'))
            violations.push(`batch report with release answered ${res.status} ${JSON.stringify(res.body)}`);
          live.delete(lease.leaseID);
        }
      }),
    );
    expect(violations).toEqual([]);
    // Only grants, refusals and releases: nothing failed.
    expect([...statuses.keys()].filter((s) => ![201, 204, 409].includes(s))).toEqual([]);
    expect(statuses.get(201)).toBeGreaterThan(10);
    // Every replica reads the same loads, within every cap, adding up to the live leases.
    const views = await Promise.all(ports.map((port) => loads(port)));
    for (const view of views) expect(view).toEqual(views[0]);
    for (const [id, load] of views[0]) expect(load).toBeLessThanOrEqual(CAPS.get(id)!);
    expect([...views[0].values()].reduce((a, b) => a + b, 0)).toBe(live.size);
    for (const id of live.keys()) await call(ports[0], 'DELETE', `/v1/leases/${id}`);
  });

  it('a SIGKILL of one process under load loses no lease, session or cooldown, and the others keep answering; so does a restart of all three', async () => {
    const [a, b, c] = running;
    // State to keep: leases (two in sessions), and a ban of p1 for TARGET (p0 is banned already).
    const held: Granted[] = [];
    for (const [i, body] of [
      { ttlSeconds: 600, session: 'keep-1' },
      { ttlSeconds: 600, session: 'keep-2' },
      { ttlSeconds: 600 },
      { ttlSeconds: 600, target: 'other.example' },
    ].entries()) {
      const res = await call([a, b, c][i % 3].port, 'POST', '/v1/leases', body);
      expect(res.status).toBe(201);
      held.push(res.body as unknown as Granted);
    }
    const forBan = (await call(a.port, 'POST', '/v1/leases', { target: TARGET, ttlSeconds: 600 }))
      .body as unknown as Granted;
    await call(b.port, 'POST', `/v1/leases/${forBan.leaseID}/report`, { result: 'banned' });
    await call(c.port, 'DELETE', `/v1/leases/${forBan.leaseID}`);
    bannedForTarget.add(forBan.proxy.id);
    const bannedNow = new Set(bannedForTarget);

    const boundTo = new Map(held.filter((l) => l.session).map((l) => [l.session!.key, l.proxy.id]));
    /** Everything the book must still know, asked through `port`. */
    const verify = async (port: number) => {
      for (const lease of held) {
        const renewed = await call(port, 'POST', `/v1/leases/${lease.leaseID}/renew`, {});
        expect({ lease: lease.leaseID, status: renewed.status }).toEqual({
          lease: lease.leaseID,
          status: 200,
        });
      }
      for (const lease of held.filter((l) => l.session !== undefined)) {
        const key = lease.session!.key;
        const again = await call(port, 'POST', '/v1/leases', { ttlSeconds: 60, session: key });
        const granted = again.body as unknown as Granted;
        // Its proxy may be full now; then it moves, and says so. It never silently changes.
        if (granted.session?.moved !== true) expect(granted.proxy.id).toBe(boundTo.get(key));
        boundTo.set(key, granted.proxy.id);
        await call(port, 'DELETE', `/v1/leases/${granted.leaseID}`);
      }
      for (let i = 0; i < 5; i++) {
        const res = await call(port, 'POST', '/v1/leases', { target: TARGET, ttlSeconds: 60 });
        if (res.status === 201) {
          const granted = res.body as unknown as Granted;
          expect(bannedNow.has(granted.proxy.id)).toBe(false);
          await call(port, 'DELETE', `/v1/leases/${granted.leaseID}`);
        }
      }
    };

    // Load on the two that stay, while the third is killed.
    let stop = false;
    const failures: string[] = [];
    let answered = 0;
    const load = (async () => {
      while (!stop) {
        for (const port of [b.port, c.port]) {
          try {
            const res = await call(port, 'POST', '/v1/leases', { ttlSeconds: 5 });
            if (res.status === 201)
              await call(port, 'DELETE', `/v1/leases/${(res.body as unknown as Granted).leaseID}`);
            else if (res.status !== 409) failures.push(`:${port} ${res.status}`);
            answered++;
          } catch (err) {
            failures.push(`:${port} ${String(err)}`);
          }
        }
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 500));
    await stopReplica(a, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    stop = true;
    await load;
    expect(failures).toEqual([]);
    expect(answered).toBeGreaterThan(10);
    await verify(b.port);

    // Restart every process: the book is Redis's, not theirs.
    await stopReplica(b, 'SIGTERM');
    await stopReplica(c, 'SIGKILL');
    const fresh = [await startReplica(), await startReplica(), await startReplica()];
    await verify(fresh[2].port);
    for (const lease of held) await call(fresh[0].port, 'DELETE', `/v1/leases/${lease.leaseID}`);
    const after = await loads(fresh[1].port);
    expect([...after.values()].reduce((x, y) => x + y, 0)).toBe(0);
  });

  it('a rolling update: an old and a new process serving side by side for 30 s under a lease loop never exceed maxLeases nor lease a proxy cooling down for its target', async () => {
    const old = running[0];
    const started = startReplica();
    const violations: string[] = [];
    let grants = 0;
    let stop = false;
    const bannedNow = new Set(bannedForTarget);
    const loop = async (port: () => number | undefined) => {
      const mine: string[] = [];
      while (!stop) {
        const p = port();
        if (p === undefined) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          continue;
        }
        const res = await call(p, 'POST', '/v1/leases', { target: TARGET, ttlSeconds: 30 });
        if (res.status === 201) {
          grants++;
          const lease = res.body as unknown as Granted;
          if (lease.proxy.activeLeases > lease.proxy.maxLeases)
            violations.push(`${lease.proxy.id} at ${lease.proxy.activeLeases} > ${lease.proxy.maxLeases}`);
          if (bannedNow.has(lease.proxy.id))
            violations.push(`${lease.proxy.id} leased while cooling for ${TARGET}`);
          mine.push(lease.leaseID);
        }
        // Hold up to three, so the caps are reached; a refusal frees one of its own.
        if (mine.length > 3 || (res.status !== 201 && mine.length > 0)) {
          const released = await call(p, 'DELETE', `/v1/leases/${mine.shift()!}`);
          if (released.status !== 204) violations.push(`release answered ${released.status}`);
        }
      }
      for (const id of mine) {
        const released = await call(old.port, 'DELETE', `/v1/leases/${id}`);
        if (released.status !== 204) violations.push(`release answered ${released.status}`);
      }
    };
    let fresh: Replica | undefined;
    void started.then((r) => (fresh = r));
    const loops = [
      ...Array.from({ length: 4 }, () => loop(() => old.port)),
      ...Array.from({ length: 4 }, () => loop(() => fresh?.port)),
    ];
    await started;
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    stop = true;
    await Promise.all(loops);
    expect(violations).toEqual([]);
    expect(grants).toBeGreaterThan(100);
    const view = await loads(fresh!.port);
    for (const [id, n] of view) expect({ id, n }).toEqual({ id, n: 0 });
  });
});

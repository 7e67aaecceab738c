// Limits that hold per team hold across replicas: two real operator processes
// (`--components=discovery --lease-store=redis`) on one real redis-server, one token with a
// lease quota of 3 (`--discovery-lease-quota=3`) and a cooldown quota of 2. The book judges
// both, so the token holds 3 leases in all however it spreads its requests (each process
// counting its own let it hold 6) and keeps 2 cooldowns running (3 before); a lease released
// through the other replica makes room at once; and a guesser
// spreading wrong tokens over both replicas meets one count per address, not one per replica.
import { CoreV1Api } from '@kubernetes/client-node';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { KUBECONFIG_ENV, testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, until, type OperatorProcess } from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';

const kc = testKubeConfig();
const namespace = uniqueName('shared-limits');
const LEASE_QUOTA = 3;
const COOLDOWN_QUOTA = 2;
/** The per-address wrong-token burst (source-limiter.ts's DEFAULT_FAILED_AUTH_LIMITS). */
const WRONG_TOKEN_BURST = 20;
const TOKEN = 'team-a-token-0123456789abcdef0123456789';
const TEAM_B = 'team-b-token-0123456789abcdef0123456789';
const PROXIES = 4;
const agent = new Agent({ connections: 16 });
/** The guesser's own source address: the valid client's requests are not behind it. */
const guesser = new Agent({ connections: 4, connect: { localAddress: '127.0.31.7' } });

let redis: RedisServer;
let dir: string;
const replicas: { op: OperatorProcess; port: number }[] = [];

async function startReplica(): Promise<void> {
  const [port, metrics] = [await freePort(), await freePort()];
  const op = runOperator(
    [
      '--kubeconfig',
      process.env[KUBECONFIG_ENV]!,
      '--watch-namespace',
      namespace,
      '--components=discovery',
      '--lease-store=redis',
      `--redis-url=${redis.url}`,
      `--redis-key-prefix=${namespace}`,
      '--redis-timeout=15000',
      '--metrics-address',
      `127.0.0.1:${metrics}`,
      '--discovery-address',
      `127.0.0.1:${port}`,
      '--discovery-tokens-file',
      join(dir, 'tokens'),
      `--discovery-lease-quota=${LEASE_QUOTA}`,
      `--discovery-cooldown-quota=${COOLDOWN_QUOTA}`,
      '--log-level=warn',
    ],
    { DISCOVERY_UNAUTHENTICATED: 'false' },
  );
  replicas.push({ op, port });
  await until(
    `replica on :${port} serving the fleet`,
    async () => {
      const res = await call(port, 'GET', '/v1/proxies?healthy=true');
      return res.status === 200 && (res.body.items as unknown[]).length === PROXIES ? true : undefined;
    },
    90_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${op.output()}`);
  });
}

async function call(port: number, method: string, path: string, body?: unknown, token = TOKEN, via = agent) {
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    method: method as 'GET',
    dispatcher: via,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 20_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown> };
}

beforeAll(async () => {
  redis = await startRedisServer();
  dir = await mkdtemp(join(tmpdir(), 'shared-limits-'));
  await writeFile(join(dir, 'tokens'), `team-a: ${TOKEN}\nteam-b: ${TEAM_B}\n`, { mode: 0o600 });
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const proxies = new ProxyApi(kc, namespace);
  const now = new Date().toISOString();
  for (let i = 0; i < PROXIES; i++) {
    await proxies.create(`p${i}`, {
      spec: { mode: 'External', endpoint: { host: `127.0.0.${40 + i}`, port: 3128 }, maxLeases: 10 },
    });
    // No controller runs here: the test writes the verdicts the health engine would.
    await proxies.patchStatus(`p${i}`, {
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
  await Promise.all([startReplica(), startReplica()]);
}, 180_000);

afterAll(async () => {
  for (const { op } of replicas) {
    op.child.kill('SIGKILL');
    await op.exited;
  }
  await agent.close();
  await guesser.close();
  await redis?.stop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('two discovery replicas on one Redis book', () => {
  it(`a token with a lease quota of ${LEASE_QUOTA} holds ${LEASE_QUOTA} leases in all, through either replica (each counting its own gave it ${2 * LEASE_QUOTA}); a release through the other replica makes room`, async () => {
    const [a, b] = replicas.map((r) => r.port);
    // Three requests through each replica, one after the other, alternating.
    const answers: { status: number; body: Record<string, unknown> }[] = [];
    for (let i = 0; i < 2 * LEASE_QUOTA; i++)
      answers.push(await call(i % 2 === 0 ? a : b, 'POST', '/v1/leases', { ttlSeconds: 600 }));
    const granted = answers.filter((r) => r.status === 201);
    const refused = answers.filter((r) => r.status === 429);
    console.log(
      `lease quota ${LEASE_QUOTA} over two replicas: ${granted.length} granted, ${refused.length} refused`,
    );
    expect(granted.length).toBe(LEASE_QUOTA);
    expect(refused.map((r) => r.body.error)).toEqual(Array(LEASE_QUOTA).fill('lease_quota'));
    // In parallel too: the quota is judged in one atomic step of the book.
    const parallel = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        call(i % 2 === 0 ? a : b, 'POST', '/v1/leases', { ttlSeconds: 600 }),
      ),
    );
    expect(parallel.filter((r) => r.status === 201)).toHaveLength(0);

    // A lease taken through A, released through B: A grants the next one at once.
    const [first, ...rest] = granted.map((r) => r.body.leaseID as string);
    expect((await call(b, 'DELETE', `/v1/leases/${first}`)).status).toBe(204);
    const next = await call(a, 'POST', '/v1/leases', { ttlSeconds: 600 });
    expect(next.status).toBe(201);
    expect((await call(b, 'POST', '/v1/leases', { ttlSeconds: 600 })).body.error).toBe('lease_quota');
    expect(rest).toHaveLength(LEASE_QUOTA - 1);
  }, 60_000);

  it(`a token's bans keep ${COOLDOWN_QUOTA} cooldowns running in all, through either replica (each counting its own accepted ${LEASE_QUOTA} of ${LEASE_QUOTA})`, async () => {
    const [a, b] = replicas.map((r) => r.port);
    // Team B's own leases (its lease quota is 3 too), one a replica.
    const held: string[] = [];
    for (let i = 0; i < LEASE_QUOTA; i++) {
      const res = await call(i % 2 === 0 ? a : b, 'POST', '/v1/leases', { ttlSeconds: 600 }, TEAM_B);
      expect(res.status).toBe(201);
      held.push(res.body.leaseID as string);
    }
    const answers = [];
    for (const [i, leaseID] of held.entries())
      answers.push(
        await call(
          i % 2 === 0 ? a : b,
          'POST',
          `/v1/leases/${leaseID}/report`,
          { result: 'banned', target: `site-${i}.example` },
          TEAM_B,
        ),
      );
    console.log(
      `cooldown quota ${COOLDOWN_QUOTA} over two replicas: ${answers.map((r) => r.status).join(' ')}`,
    );
    expect(answers.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(answers[2].body.error).toBe('cooldown_quota');
    // One of its own running pairs may be reported again, through the other replica.
    expect(
      (
        await call(
          b,
          'POST',
          `/v1/leases/${held[0]}/report`,
          { result: 'banned', target: 'site-0.example' },
          TEAM_B,
        )
      ).status,
    ).toBe(200);
  }, 60_000);

  it(`a guesser spreading wrong tokens over both replicas gets one burst (${WRONG_TOKEN_BURST}) of them checked in all, not one per replica; the valid token still passes`, async () => {
    const [a, b] = replicas.map((r) => r.port);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 4 * WRONG_TOKEN_BURST; i++) {
      const res = await call(
        i % 2 === 0 ? a : b,
        'GET',
        '/v1/proxies',
        undefined,
        `guess-${i}-0123456789abcdef`,
        guesser,
      );
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
    console.log(`wrong tokens over two replicas: ${JSON.stringify(Object.fromEntries(statuses))}`);
    // Checked (401): the one burst, one more the other replica checks before its first answer
    // from the book tells it, and the odd one a loaded machine lets pass while an answer is
    // in flight. Each counting alone: 2 × the burst (40).
    expect(statuses.get(401)).toBeLessThanOrEqual(WRONG_TOKEN_BURST + 3);
    expect(statuses.get(429)).toBeGreaterThanOrEqual(3 * WRONG_TOKEN_BURST - 3);
    expect((await call(a, 'GET', '/v1/proxies')).status).toBe(200);
    expect((await call(b, 'GET', '/v1/proxies')).status).toBe(200);
  }, 60_000);
});

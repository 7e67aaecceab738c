import { createServer, type Server } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { KUBECONFIG_ENV, testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, scrape, until } from '../harness/operator-process.js';
import { startRedisServer } from '../harness/redis-server.js';

// Issue 11 item 7: nothing fails silently at start-up. The real operator process, at the
// default log level.
const kc = testKubeConfig();
const namespace = uniqueName('startup');
let dir: string;

const common = (): string[] => [
  '--kubeconfig',
  process.env[KUBECONFIG_ENV]!,
  '--watch-namespace',
  namespace,
  '--cluster-name',
  'startup-test',
];

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

async function exitWithin(exited: Promise<number | null>, ms: number): Promise<number | null | 'alive'> {
  return Promise.race([exited, new Promise<'alive'>((r) => setTimeout(() => r('alive'), ms))]);
}

beforeAll(async () => {
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  dir = await mkdtemp(join(tmpdir(), 'startup-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('start-up failures', () => {
  it('a missing leader-election namespace is logged at error level with the fix, and counted', async () => {
    const metrics = await freePort();
    const missing = uniqueName('no-such-ns');
    const op = runOperator([
      ...common(),
      '--leader-election-namespace',
      missing,
      '--metrics-address',
      `127.0.0.1:${metrics}`,
      '--discovery-address',
      `127.0.0.1:${await freePort()}`,
    ]);
    try {
      const line = await until('an error-level leader election log', async () =>
        op
          .output()
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as { level: number; msg: string; fix?: string; reason?: string })
          .find((l) => l.level >= 50 && /leader election failed/.test(l.msg)),
      );
      expect(line.reason).toBe('NamespaceNotFound');
      expect(line.fix).toContain(`kubectl create namespace ${missing}`);
      expect(line.fix).toContain('--leader-elect=false');
      const counted = await until('the error counted', async () => {
        const m = /operator_framework_leader_election_errors_total\{reason="NamespaceNotFound"\} (\d+)/.exec(
          await scrape(metrics),
        );
        return m && Number(m[1]) >= 1 ? Number(m[1]) : undefined;
      });
      expect(counted).toBeGreaterThanOrEqual(1);
      op.child.kill('SIGTERM');
      expect(await exitWithin(op.exited, 10_000)).toBe(0);
    } finally {
      op.child.kill('SIGKILL');
    }
  }, 120_000);

  it.each(['discovery-address', 'metrics-address', 'gateway-address'])(
    'a --%s port already in use is fatal: exit 2 naming the flag, no retry loop',
    async (flag) => {
      const taken = await freePort();
      const holder = await listen(taken);
      const ports: Record<string, string> = {
        'discovery-address': `127.0.0.1:${await freePort()}`,
        'metrics-address': `127.0.0.1:${await freePort()}`,
        'gateway-address': `127.0.0.1:${await freePort()}`,
        [flag]: `127.0.0.1:${taken}`,
      };
      const op = runOperator([
        ...common(),
        '--leader-elect=false',
        '--metrics-address',
        ports['metrics-address'],
        '--discovery-address',
        ports['discovery-address'],
        '--gateway-address',
        ports['gateway-address'],
      ]);
      try {
        expect(await exitWithin(op.exited, 60_000)).toBe(2);
        expect(op.output()).toMatch(
          new RegExp(
            `proxy-operator: --${flag}: cannot listen on 127\\.0\\.0\\.1:${taken}: the address is already in use`,
          ),
        );
      } finally {
        op.child.kill('SIGKILL');
        holder.close();
      }
    },
    90_000,
  );

  it('a Redis whose maxmemory-policy may evict the book stops start-up naming the flag that accepts it', async () => {
    // Issue 47 item 5: managed offerings default to volatile-lru, which can evict running bans.
    const redis = await startRedisServer(['--maxmemory-policy', 'volatile-lru']);
    const op = runOperator([
      ...common(),
      '--leader-elect=false',
      '--lease-store=redis',
      '--redis-url',
      redis.url,
      '--metrics-address',
      `127.0.0.1:${await freePort()}`,
      '--discovery-address',
      `127.0.0.1:${await freePort()}`,
    ]);
    try {
      expect(await exitWithin(op.exited, 60_000)).toBe(2);
      expect(op.output()).toMatch(
        /proxy-operator: --redis-url: the Redis's maxmemory-policy is volatile-lru.*--redis-allow-eviction/,
      );
    } finally {
      op.child.kill('SIGKILL');
      await redis.stop();
    }
  }, 90_000);

  it('an owner identity it can neither read nor was given stops start-up naming --cluster-name', async () => {
    // A kubeconfig whose server refuses connections: the kube-system Namespace cannot be read.
    const kubeconfig = join(dir, 'unreachable.yaml');
    await writeFile(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    const op = runOperator(['--kubeconfig', kubeconfig, '--leader-elect=false']);
    try {
      expect(await exitWithin(op.exited, 60_000)).toBe(2);
      expect(op.output()).toMatch(
        /proxy-operator: cannot read the UID of the kube-system Namespace.*--cluster-name/,
      );
    } finally {
      op.child.kill('SIGKILL');
    }
  }, 90_000);

  it.each([
    ['--probe-ca-file', ['--probe-ca-file', 'missing-probe-ca.pem']],
    [
      '--redis-ca-file',
      ['--lease-store=redis', '--redis-url=rediss://127.0.0.1:1', '--redis-ca-file', 'missing-redis-ca.pem'],
    ],
  ])(
    'a %s it cannot read stops start-up naming the flag',
    async (flag, args) => {
      const op = runOperator([
        ...common(),
        '--leader-elect=false',
        ...args.map((a) => (a.endsWith('.pem') ? join(dir, a) : a)),
      ]);
      try {
        expect(await exitWithin(op.exited, 60_000)).toBe(2);
        expect(op.output()).toContain(`proxy-operator: ${flag}: ENOENT`);
      } finally {
        op.child.kill('SIGKILL');
      }
    },
    90_000,
  );
});

// Issue 23 item 4: two operator processes on one host, with the same POD_NAME (and so the same
// hostname), never both lead. Before the per-process identity each took the other's Lease for
// its own and both led. Real parts: the real API server of framework/testing, two real
// operator processes (cmd/operator.ts), their /metrics and the Lease object itself.
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  runOperatorIn,
  scrape,
  until,
  untilReady,
  type ServingOperator as Replica,
} from '../harness/operator-process.js';

const kc = testKubeConfig();
const leases = kc.makeApiClient(CoordinationV1Api);
const POD_NAME = 'same-pod';

/** operator_framework_is_leader of a replica: 1 while it holds the Lease, as it sees it. */
async function leads(r: Replica): Promise<boolean> {
  const m = /^operator_framework_is_leader(?:\{[^}]*\})? (\d+)/m.exec(await scrape(r.metricsPort));
  if (m === null) throw new Error('no operator_framework_is_leader in /metrics');
  return m[1] === '1';
}

/** The identity a replica logged on becoming leader (pino's JSON line), if it did. */
function ledAs(r: Replica): string | undefined {
  for (const line of r.process.output().split('\n')) {
    if (!line.includes('"became leader"')) continue;
    const entry = JSON.parse(line) as { identity?: string; leading?: boolean };
    if (entry.leading === true) return entry.identity;
  }
  return undefined;
}

async function holder(namespace: string): Promise<string> {
  const lease = await leases.readNamespacedLease({ name: 'proxy-operator-leader', namespace });
  return lease.spec?.holderIdentity ?? '';
}

beforeAll(async () => {
  await installProxyCrd(kc);
});

describe('two operator processes with one POD_NAME on one host', () => {
  it('get distinct identities, never both lead, and the survivor takes over when the leader is killed', async () => {
    const namespace = uniqueName('same-host');
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    const a = await runOperatorIn(namespace, { env: { POD_NAME } });
    const b = await runOperatorIn(namespace, { env: { POD_NAME } });
    const replicas = [a, b];
    try {
      for (const r of replicas) await untilReady(r);
      await until('one of them leads', async () =>
        (await Promise.all(replicas.map(leads))).some(Boolean) ? true : undefined,
      );

      // Several renewals (every 2 s) with both running: exactly one leads at every sample,
      // and the Lease names that one.
      const samples: boolean[][] = [];
      for (const end = Date.now() + 8_000; Date.now() < end;) {
        samples.push(await Promise.all(replicas.map(leads)));
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(samples.filter((s) => s.filter(Boolean).length !== 1)).toEqual([]);
      const [leader, follower] = samples.at(-1)![0] ? [a, b] : [b, a];
      const first = ledAs(leader);
      expect(first).toMatch(new RegExp(`^${POD_NAME}_[0-9a-f]{12}$`));
      expect(ledAs(follower)).toBeUndefined();
      expect(await holder(namespace)).toBe(first);

      // A crash, not a shutdown: the Lease is not released, so the survivor must see it
      // expire under another identity before it takes it.
      leader.process.child.kill('SIGKILL');
      await leader.process.exited;
      await until('the survivor leads', async () => ((await leads(follower)) ? true : undefined), 60_000);
      const second = ledAs(follower);
      expect(second).toMatch(new RegExp(`^${POD_NAME}_[0-9a-f]{12}$`));
      expect(second).not.toBe(first);
      expect(await holder(namespace)).toBe(second);
    } finally {
      for (const r of replicas) r.process.child.kill('SIGKILL');
    }
  }, 180_000);
});

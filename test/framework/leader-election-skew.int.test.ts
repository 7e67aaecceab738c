import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { LeaderElector } from '../../framework/core/leader-election.js';
import { KubeClient } from '../../framework/utils/kube-client.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';

// Issue 11 item 8: expiry is judged by when the holder's record last changed as observed
// locally (client-go's rule), never by the holder's renewTime, so a holder with a skewed clock
// neither loses its lease while it renews nor keeps it after it stops.
const kc = testKubeConfig();
const client = new KubeClient(kc);
const namespace = uniqueName('le-skew');
const quiet = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const LEASE = { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 };
const path = (name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases${name ? `/${name}` : ''}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const microTime = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');

/** A holder whose clock is `skewMs` off: renews every second, each time with a new (skewed) renewTime. */
function skewedHolder(name: string, skewMs: number): { stop(): Promise<number> } {
  let stopped = false;
  let lastWrite = 0;
  const loop = (async () => {
    const spec = () => ({
      holderIdentity: 'skewed-holder',
      leaseDurationSeconds: LEASE.leaseDurationSeconds,
      acquireTime: microTime(Date.now() + skewMs),
      renewTime: microTime(Date.now() + skewMs),
    });
    await client.request('POST', path(), {
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name, namespace },
        spec: spec(),
      },
    });
    lastWrite = Date.now();
    while (!stopped) {
      await sleep(1_000);
      if (stopped) break;
      const lease = await client.request<{ spec: Record<string, unknown> }>('GET', path(name));
      lease.spec = { ...lease.spec, renewTime: microTime(Date.now() + skewMs) };
      await client.request('PUT', path(name), { body: lease });
      lastWrite = Date.now();
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return lastWrite;
    },
  };
}

beforeAll(async () => {
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
});

describe('leader election under clock skew', () => {
  it.each([
    ['an hour behind', -3_600_000],
    ['an hour ahead', 3_600_000],
  ])(
    'a holder whose clock is %s keeps the lease while it renews; a candidate takes over a lease duration after it stops',
    async (_what, skewMs) => {
      const name = `skew-${skewMs > 0 ? 'ahead' : 'behind'}`;
      const holder = skewedHolder(name, skewMs);
      let ledAt: number | undefined;
      const candidate = new LeaderElector(
        client,
        { namespace, name, identity: 'candidate', ...LEASE },
        { onStartedLeading: () => (ledAt ??= Date.now()), onStoppedLeading: () => {} },
        quiet,
      );
      try {
        await sleep(500);
        candidate.start();
        // Two lease durations of steady renewals: the candidate must never take over.
        await sleep(LEASE.leaseDurationSeconds * 2_000);
        expect(ledAt).toBeUndefined();

        const lastRenewal = await holder.stop();
        const deadline = Date.now() + 20_000;
        while (ledAt === undefined && Date.now() < deadline) await sleep(100);
        expect(ledAt).toBeDefined();
        const waited = ledAt! - lastRenewal;
        // Not before a full lease duration of local time since the record last changed, and
        // not much later than that plus one retry period.
        expect(waited).toBeGreaterThanOrEqual(LEASE.leaseDurationSeconds * 1000 - 100);
        expect(waited).toBeLessThan((LEASE.leaseDurationSeconds + LEASE.retryPeriodSeconds + 3) * 1000);
      } finally {
        await holder.stop();
        await candidate.stop(true);
      }
    },
    60_000,
  );
});

import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Agent, request } from 'undici';
import { eventually, managedSpec, operatorSuite } from './operator-fixture.js';

const COUNT = 200;
let transitions = 0;
const suite = operatorSuite('scale', {
  mock: { provisioningSeconds: 1 },
  // Counts the health engine's status-affecting verdicts, to compare with the writes.
  logger: pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        transitions += chunk.toString().split('proxy health transition').length - 1;
        done();
      },
    }),
  ),
});
const { api, kc } = suite;

/** Writes to Proxy objects and Events as the API server itself counts them. */
async function apiServerWrites(): Promise<{ proxies: number; events: number }> {
  const cluster = kc.getCurrentCluster()!;
  const dispatcher = new Agent({ connect: { ca: Buffer.from(cluster.caData!, 'base64').toString() } });
  try {
    const res = await request(`${cluster.server}/metrics`, {
      dispatcher,
      headers: { authorization: `Bearer ${kc.getCurrentUser()!.token}` },
    });
    const text = await res.body.text();
    const sum = (resource: string) =>
      text
        .split('\n')
        .filter(
          (l) =>
            l.startsWith('apiserver_request_total{') &&
            l.includes(`resource="${resource}"`) &&
            /verb="(PATCH|PUT|POST|APPLY)"/.test(l),
        )
        .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    return { proxies: sum('proxies'), events: sum('events') };
  } finally {
    await dispatcher.close();
  }
}

describe(`${COUNT} Managed proxies created at once`, () => {
  it('all reach Ready with a bounded number of API writes each, and afterwards write only for status-affecting verdicts', async () => {
    const before = await apiServerWrites();
    const spec = managedSpec(suite.target, {
      healthCheck: { ...managedSpec(suite.target).healthCheck, intervalSeconds: 5, timeoutSeconds: 2 },
    });
    await Promise.all(Array.from({ length: COUNT }, (_, i) => api.create(`px-${i}`, { spec })));
    await eventually(
      `all ${COUNT} Ready`,
      async () => {
        const ready = (await api.list()).filter((p) => p.status?.phase === 'Ready');
        return ready.length === COUNT ? true : undefined;
      },
      240_000,
    );
    const ready = await apiServerWrites();
    // The test's own creates are POSTs to proxies too.
    const proxyWrites = (ready.proxies - before.proxies - COUNT) / COUNT;
    const eventWrites = (ready.events - before.events) / COUNT;
    process.stdout.write(
      `[scale] per proxy until Ready: ${proxyWrites.toFixed(2)} Proxy writes, ${eventWrites.toFixed(2)} Event writes\n`,
    );
    // finalizer, spec-hash annotation, Creating, starting, running, handled marker, first verdict
    expect(proxyWrites).toBeLessThanOrEqual(8);
    // Creating, Provisioned, Ready; a proxy that flaps under load adds an Unhealthy and a Ready.
    expect(eventWrites).toBeLessThanOrEqual(4);

    // Several probe intervals of a running fleet (~480 probes): a write only where the health
    // engine reported a status-affecting change (a latency-band change counts), never per probe.
    // Verdicts are counted from 3 s before the write window opens: a verdict reaches status
    // through the reconciler a moment later, so a write early in the window may answer one.
    await new Promise((r) => setTimeout(r, 5_000));
    const transitionsFrom = transitions;
    await new Promise((r) => setTimeout(r, 3_000));
    const writesFrom = (await apiServerWrites()).proxies;
    await new Promise((r) => setTimeout(r, 12_000));
    const writes = (await apiServerWrites()).proxies - writesFrom;
    const changes = transitions - transitionsFrom;
    process.stdout.write(
      `[scale] 12 s of probing: ${writes} Proxy writes for ${changes} status-affecting verdicts\n`,
    );
    expect(writes).toBeLessThanOrEqual(changes);
  }, 300_000);
});

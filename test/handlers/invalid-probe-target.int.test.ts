import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Instance } from '../../providers/contract.js';
import { condition, eventsOnceThere, eventually, managedSpec, operatorSuite } from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

// Issue 12 item 2: a proxy that cannot be probed says so, once.
const BAD_ADDRESS = 'fe80::1%eth0'; // an IPv6 zone id: no URL can carry it

/** The mock, reporting an address the prober cannot build a URL for (a provider CEL never sees). */
class ZonedAddresses extends DelegatingProvider {
  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    return { ...(await this.inner.get(id, signal)), ip: BAD_ADDRESS };
  }
}

const warnings: Array<{ msg: string; proxy?: string }> = [];
const logger = pino(
  { level: 'warn' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) warnings.push(JSON.parse(line));
      done();
    },
  }),
);

// The health runner re-reads the cache every 0.2 s here: a warning per sync would be dozens.
const suite = operatorSuite('unprobeable', {
  mock: { serveTraffic: false },
  providers: (mock) => ({ mock: new ZonedAddresses(mock) }),
  logger,
});
const { api, kc, namespace } = suite;

describe('a proxy that cannot be probed', () => {
  it('gets Healthy=False/InvalidProbeTarget and one Warning Event, and is logged once', async () => {
    await api.create('zoned', { spec: managedSpec(suite.target) });
    const p = await eventually('InvalidProbeTarget', async () => {
      const x = await api.get('zoned');
      return condition(x, 'Healthy')?.reason === 'InvalidProbeTarget' ? x : undefined;
    });
    expect(p.status?.ip).toBe(BAD_ADDRESS);
    expect(p.status?.phase).toBe('Unhealthy');
    expect(condition(p, 'Healthy')).toMatchObject({ status: 'False' });
    expect(condition(p, 'Healthy')?.message).toMatch(/not a usable URL host and port/);

    // Many syncs and reconciles later: still one Event, one warning.
    await new Promise((r) => setTimeout(r, 5_000));
    const events = (await eventsOnceThere(kc, namespace, 'zoned', 'InvalidProbeTarget')).filter(
      (e) => e.reason === 'InvalidProbeTarget',
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Warning' });
    expect(warnings.filter((w) => w.proxy === `${namespace}/zoned`)).toHaveLength(1);
  });
});

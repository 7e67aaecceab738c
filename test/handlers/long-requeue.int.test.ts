import { pino } from 'pino';
import type { Instance } from '../../providers/contract.js';
import { ProxyController } from '../../handlers/proxy-controller.js';
import { condition, eventually, managedSpec, operatorSuite } from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

// A requeue longer than a Node timer holds (2^31-1 ms, 24.8 days) fired after 1 ms: a Proxy
// with `spec.rotation.maxAgeSeconds: 2592000` (30 days, the schema allows a year) was
// reconciled, with a provider get each time, hundreds of times a second for its whole life.

/** The mock, counting the provider gets: a steady proxy's reconciles each make one. */
class Counting extends DelegatingProvider {
  gets = 0;
  override get(id: string, signal?: AbortSignal): Promise<Instance> {
    this.gets++;
    return this.inner.get(id, signal);
  }
}

let counting: Counting;
const suite = operatorSuite('long-requeue', {
  providers: (mock) => ({ mock: (counting = new Counting(mock)) }),
  // Only the reconciler, with its drift check far away: every get here is a reconcile's.
  settings: { driftCheckSeconds: 600 },
  handlers: [ProxyController],
  logger: pino({ level: 'silent' }),
});
const { api } = suite;

describe('a requeue beyond 24.8 days', () => {
  it.each([
    ['30 days', 30 * 24 * 3600],
    ['365 days, the schema maximum', 365 * 24 * 3600],
  ])('waits: a proxy rotating after %s is not reconciled again within 3 s', async (_case, maxAgeSeconds) => {
    const name = `age-${maxAgeSeconds}`;
    await api.create(name, { spec: managedSpec(suite.target, { rotation: { maxAgeSeconds } }) });
    await eventually('InstanceRunning', async () =>
      condition(await api.get(name), 'Provisioned')?.reason === 'InstanceRunning' ? true : undefined,
    );
    // Let the status write that said so come back as a watch event and be reconciled.
    await new Promise((r) => setTimeout(r, 1000));
    const before = counting.gets;
    await new Promise((r) => setTimeout(r, 3000));
    expect(counting.gets - before).toBeLessThanOrEqual(2);
  });
});

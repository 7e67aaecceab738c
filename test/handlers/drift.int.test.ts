import { pino } from 'pino';
import type { CreateRequest, Instance } from '../../providers/contract.js';
import { ProxyController } from '../../handlers/proxy-controller.js';
import { condition, eventually, managedSpec, operatorSuite } from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

/** The mock, counting calls: a steady proxy is only polled (`get`) by its drift timer. */
class Counting extends DelegatingProvider {
  readonly gets = new Map<string, number>();
  creates = 0;
  override create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    this.creates++;
    return this.inner.create(req, signal);
  }
  override get(id: string, signal?: AbortSignal): Promise<Instance> {
    this.gets.set(id, (this.gets.get(id) ?? 0) + 1);
    return this.inner.get(id, signal);
  }
}

const logs: string[] = [];
let counting: Counting;
const suite = operatorSuite('drift', {
  providers: (mock) => ({ mock: (counting = new Counting(mock)) }),
  settings: { driftCheckSeconds: 1 },
  // Only the reconciler: no health verdict may notice the lost instance in the drift timer's place.
  handlers: [ProxyController],
  logger: pino({ level: 'warn' }, { write: (line: string) => logs.push(line) }),
});
const { api } = suite;

describe('drift detection never switches itself off', () => {
  it('after a transient fault in the drift timer, an instance deleted behind the back is re-provisioned', async () => {
    await api.create('drifty', { spec: managedSpec(suite.target) });
    const running = await eventually('InstanceRunning', async () => {
      const p = await api.get('drifty');
      return condition(p, 'Provisioned')?.reason === 'InstanceRunning' ? p : undefined;
    });
    const first = running.status!.providerID!;
    // Steady: from here on only the drift timer asks for the instance.
    const polled = counting.gets.get(first) ?? 0;
    await eventually('two drift checks', async () =>
      (counting.gets.get(first) ?? 0) >= polled + 2 ? true : undefined,
    );

    suite.mock.injectFault('get', 'transient', 1);
    await eventually('the fault hit the drift timer', async () =>
      logs.some((l) => l.includes('timer handler failed')) ? true : undefined,
    );
    const created = counting.creates;
    await suite.mock.delete(first);

    // Instance names derive from the Proxy's UID and revision, so the new one has the same ID.
    const reprovisioned = await eventually(
      're-provisioned',
      async () => {
        const p = await api.get('drifty');
        const running = condition(p, 'Provisioned')?.reason === 'InstanceRunning';
        return counting.creates > created && running ? p : undefined;
      },
      20_000,
    );
    await expect(suite.mock.get(reprovisioned.status!.providerID!)).resolves.toBeDefined();
  });
});

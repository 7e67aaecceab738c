import { Registry } from 'prom-client';
import { HeldRepairs } from '../../handlers/held-repairs.js';
import type { RepairHold } from '../../handlers/repair-hold.js';

const GO: RepairHold = { kind: 'go' };
const FLEET: RepairHold = { kind: 'hold', reason: 'FleetUnhealthy', message: 'repair held: fleet' };

async function gauge(registry: Registry) {
  const metric = await registry.getSingleMetric('proxy_operator_repairs_held')?.get();
  return (metric?.values ?? []).map((v) => ({ ...v.labels, n: v.value }));
}

describe('HeldRepairs: what the shell remembers of held repairs', () => {
  it('proxy_operator_repairs_held counts the held proxies by provider and reason; a proxy that goes is no longer counted', async () => {
    const registry = new Registry();
    const holds = new HeldRepairs(registry);
    holds.note('ns/a', 'gcp', 'FleetUnhealthy');
    holds.note('ns/b', 'gcp', 'FleetUnhealthy');
    holds.note('ns/c', 'mock', 'ProbeTargetUnreachable');
    holds.note('ns/d', 'mock', undefined);
    expect(await gauge(registry)).toEqual([
      { provider: 'gcp', reason: 'FleetUnhealthy', n: 2 },
      { provider: 'mock', reason: 'ProbeTargetUnreachable', n: 1 },
    ]);
    holds.note('ns/b', 'gcp', undefined);
    holds.forget('ns/c');
    expect(await gauge(registry)).toEqual([{ provider: 'gcp', reason: 'FleetUnhealthy', n: 1 }]);
  });

  it("a held proxy whose cause ended keeps holding for its grace from the cause's end, then goes", () => {
    const holds = new HeldRepairs(new Registry());
    holds.note('ns/a', 'gcp', 'FleetUnhealthy');
    expect(holds.afterLift('ns/a', FLEET, 1_000, 60)).toBe(FLEET);
    // The cause ends at t = 10 s: the grace (60 s) runs from then, across runs.
    expect(holds.afterLift('ns/a', GO, 10_000, 60)).toMatchObject({ kind: 'hold', reason: 'FleetUnhealthy' });
    expect(holds.afterLift('ns/a', GO, 69_999, 60)).toMatchObject({ kind: 'hold', reason: 'FleetUnhealthy' });
    expect(holds.afterLift('ns/a', GO, 70_000, 60)).toEqual(GO);
  });

  it('a proxy never held goes at once; a forgotten one starts afresh', () => {
    const holds = new HeldRepairs(new Registry());
    expect(holds.afterLift('ns/a', GO, 10_000, 60)).toEqual(GO);
    holds.note('ns/b', 'gcp', 'FleetUnhealthy');
    holds.afterLift('ns/b', GO, 10_000, 60);
    holds.forget('ns/b');
    expect(holds.afterLift('ns/b', GO, 20_000, 60)).toEqual(GO);
  });
});

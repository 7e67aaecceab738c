import { instanceKey, StoppedReportingProvider } from './delegating-provider.js';
import {
  condition,
  eventually,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
  replacementsCounted,
} from './operator-fixture.js';

// A provider that reports most of its instances Stopped at once (a maintenance event, an
// account suspension, a plugin misreading state) while it refuses every create. The autopilot
// deleted every one of them at once; deleting is irreversible, so 6 of 8 reported dead are
// held (RepairHeld, ProviderReportsInstancesDead), nothing is deleted, and the hold lifts by
// itself: when only 1 of 8 is still reported dead, that one is replaced alone.

const COUNT = 8;
const deletes: string[] = [];
let provider: StoppedReportingProvider;
const suite = operatorSuite('dead-held', {
  providers: (mock) => ({ mock: (provider = new StoppedReportingProvider(mock, deletes)) }),
  settings: { driftCheckSeconds: 1, repairHoldUnhealthyPercent: 20 },
});
const { api } = suite;
const names = Array.from({ length: COUNT }, (_, i) => `px-${i}`);

async function heldCount(): Promise<number> {
  const m = await suite.op.registry.getSingleMetric('proxy_operator_repairs_held')?.get();
  return (
    m?.values
      .filter((v) => v.labels.reason === 'ProviderReportsInstancesDead')
      .reduce((a, v) => a + v.value, 0) ?? 0
  );
}

describe('a provider reporting most of its instances dead at once', () => {
  it(`6 of ${COUNT} reported Stopped: none deleted, all held; then 1 of ${COUNT}: replaced alone`, async () => {
    await Promise.all(names.map((n) => api.create(n, { spec: managedSpec(suite.target) })));
    const ready = await everyProxy(api, names, 'all Ready', isReady, 90_000);
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.providerID!]));
    const dying = names.slice(0, 6);

    provider.refusingCreates = true;
    const keyOf = async (n: string) => instanceKey(await suite.mock.get(first.get(n)!));
    provider.stopped = new Set(await Promise.all(dying.map(keyOf)));
    const heldOnes = (ps: Awaited<ReturnType<typeof api.get>>[]) =>
      ps.filter((p) => condition(p, 'Provisioned')?.reason === 'RepairHeld');
    await eventually(
      'the 6 held',
      async () => {
        if (deletes.length > 0)
          throw new Error(`deleted ${deletes.join(', ')} while 6 of ${COUNT} were reported dead`);
        const ps = await Promise.all(dying.map((n) => api.get(n)));
        return heldOnes(ps).length === dying.length ? ps : undefined;
      },
      30_000,
    );
    // Several requeues (--instance-poll-interval, 1 s here) later: still held, nothing deleted,
    // the others untouched.
    await new Promise((r) => setTimeout(r, 4_000));
    process.stdout.write(`[dead-held] 6 of ${COUNT} reported Stopped: ${deletes.length} deleted\n`);
    expect(deletes).toEqual([]);
    for (const n of dying) {
      const p = await api.get(n);
      expect(p.status?.providerID).toBe(first.get(n));
      expect(condition(p, 'Provisioned')?.reason).toBe('RepairHeld');
      expect(condition(p, 'Provisioned')?.message).toMatch(/reports 6 of its 8 serving proxies/);
    }
    for (const n of names.slice(6)) {
      const p = await api.get(n);
      expect(p.status?.providerID).toBe(first.get(n));
      expect(isReady(p)).toBe(true);
    }
    expect(await heldCount()).toBe(6);

    // The maintenance ends for all but one: the hold lifts, and that one is replaced alone.
    provider.refusingCreates = false;
    provider.stopped = new Set([await keyOf('px-0')]);
    await everyProxy(
      api,
      names,
      'px-0 replaced, the rest back on their instances',
      (p) =>
        isReady(p) &&
        condition(p, 'Provisioned')?.reason === 'InstanceRunning' &&
        p.status?.providerID === first.get(p.metadata.name),
      90_000,
    ).catch(async (e) => {
      for (const n of names) {
        const p = await api.get(n);
        process.stdout.write(
          `${n} ${p.status?.phase} ${p.status?.providerID} ${JSON.stringify(p.status?.conditions)}\n`,
        );
      }
      process.stdout.write(`deletes ${deletes.join(',')}\n`);
      throw e;
    });
    await eventually('px-0 replaced', async () =>
      (await replacementsCounted(suite.op.registry, 'InstanceDead')) >= 1 ? true : undefined,
    );
    expect(deletes).toEqual([first.get('px-0')]);
    expect(await replacementsCounted(suite.op.registry, 'InstanceDead')).toBe(1);
    expect(await heldCount()).toBe(0);
  }, 240_000);
});

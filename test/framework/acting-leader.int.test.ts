import 'reflect-metadata';
import { Registry } from 'prom-client';
import { background, controller, daemon, timer, type OperatorContext } from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { WIDGET, WidgetWorld } from './widget-world.js';

// Issue 47 item 6: a process that only serves (no @controller, no leader-only timer or daemon)
// never reports itself leader, so "no replica leads" can fire where only such processes run.
@controller({ ...WIDGET })
class Reconciling {}

@background()
class Serving {
  @daemon({ everyReplica: true }) async serve(ctx: OperatorContext) {
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  }
}

@background()
class Sweeping {
  @timer({ interval: 3600 }) sweep() {}
}

describe('which process acts as the leader', () => {
  let world: WidgetWorld;
  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-acting');
  });

  it.each<[string, Array<new () => unknown>, number]>([
    ['a @controller', [Reconciling, Serving], 1],
    ['a leader-only timer', [Sweeping], 1],
    ['only every-replica work (a process that only serves)', [Serving], 0],
  ])('with %s: operator_framework_is_leader %d', async (_, handlers, leader) => {
    const registry = new Registry();
    const op = world.operator(handlers, () => {}, { registry, leaderElection: false });
    await op.start();
    try {
      expect(op.isLeader()).toBe(true);
      expect(op.actsAsLeader()).toBe(leader === 1);
      const gauge = await registry.getSingleMetric('operator_framework_is_leader')!.get();
      expect(gauge.values.map((v) => v.value)).toEqual([leader]);
    } finally {
      await op.stop();
    }
  });
});

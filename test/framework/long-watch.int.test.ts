import 'reflect-metadata';
import { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { controller, onCreate, type HandlerContext } from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

@controller({ ...WIDGET })
class Recorder {
  constructor(@inject(CALLS) private readonly calls: Calls) {}

  @onCreate() async created(ctx: HandlerContext<Widget>) {
    this.calls.record(ctx.cause, ctx.object);
  }
}

async function watchRestarts(registry: Registry, reason: string): Promise<number> {
  const metric = await registry.getSingleMetric('operator_framework_watch_restarts_total')!.get();
  return metric.values
    .filter((v) => v.labels.kind === 'Widget' && v.labels.reason === reason)
    .reduce((n, v) => n + v.value, 0);
}

describe('watch health', () => {
  it('keeps one watch open through more than 60 s of silence and still delivers the next event', async () => {
    const world = await WidgetWorld.create(testKubeConfig(), 'fw-silence');
    const calls = new Calls();
    const registry = new Registry();
    const operator = world.operator([Recorder], (c) => c.register(CALLS, { useValue: calls }), { registry });
    await operator.start();
    try {
      await new Promise((r) => setTimeout(r, 65_000));
      await world.createWidget('late');
      await eventually(() => expect(calls.causes('late')).toEqual(['create']), 10_000);
      for (const reason of ['error', 'gone', 'watchdog'])
        expect(await watchRestarts(registry, reason)).toBe(0);
    } finally {
      await operator.stop();
    }
  }, 100_000);

  it('reopens a watch that stays silent longer than the watchdog allows, and keeps delivering', async () => {
    const world = await WidgetWorld.create(testKubeConfig(), 'fw-watchdog');
    const calls = new Calls();
    const registry = new Registry();
    const operator = world.operator([Recorder], (c) => c.register(CALLS, { useValue: calls }), {
      registry,
      watchdogSeconds: 1,
    });
    await operator.start();
    try {
      await eventually(
        async () => expect(await watchRestarts(registry, 'watchdog')).toBeGreaterThanOrEqual(1),
        10_000,
      );
      await world.createWidget('after-watchdog');
      await eventually(() => expect(calls.causes('after-watchdog')).toEqual(['create']), 10_000);
    } finally {
      await operator.stop();
    }
  });
});

import 'reflect-metadata';
import { Registry } from 'prom-client';
import {
  controller,
  daemon,
  onCreate,
  onDelete,
  timer,
  type HandlerContext,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { eventually, FINALIZER, HANDLED, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

const OBJECTS = 2000;
const BATCH = 100;

/** Every kind of per-object state: a finalizer, a handled marker, a timer and a daemon. */
@controller({ ...WIDGET, finalizer: FINALIZER, maxConcurrentReconciles: 16 })
class Remembering {
  @onCreate() async created(_ctx: HandlerContext<Widget>) {}
  @onDelete() async deleted(_ctx: HandlerContext<Widget>) {}
  @timer({ interval: 3600 }) async tick(_ctx: HandlerContext<Widget>) {}
  @daemon() async watch(ctx: HandlerContext<Widget>) {
    await ctx.stopped;
  }
}

async function inBatches(names: string[], fn: (name: string) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < names.length; i += BATCH) await Promise.all(names.slice(i, i + BATCH).map(fn));
}

async function tracked(registry: Registry): Promise<number> {
  const metric = await registry.getSingleMetric('operator_framework_tracked_objects')!.get();
  return metric.values.find((v) => v.labels.kind === 'Widget')?.value ?? 0;
}

describe('the per-object memory', () => {
  let world: WidgetWorld;
  let operator: Operator;
  const registry = new Registry();

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-memory');
    operator = world.operator([Remembering], () => {}, { registry });
    await operator.start();
  });
  afterAll(() => operator.stop());

  it(`is forgotten with the object: ${OBJECTS} widgets created and deleted leave the tracked count at its baseline`, async () => {
    await world.createWidget('keeper');
    await eventually(async () =>
      expect((await world.getWidget('keeper')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    const baseline = await tracked(registry);
    expect(baseline).toBe(1);

    const names = Array.from({ length: OBJECTS }, (_, i) => `w-${i}`);
    await inBatches(names, (n) => world.createWidget(n));
    await eventually(async () => expect(await tracked(registry)).toBe(OBJECTS + 1), 120_000, 500);
    // Handled (finalizer added, marker written) before deletion, so every path leaves state behind.
    await eventually(
      () => {
        const handled = operator.cache
          .list<Widget>(WIDGET, { namespace: world.namespace })
          .filter((w) => w.metadata.annotations?.[HANDLED] === '1');
        expect(handled).toHaveLength(OBJECTS + 1);
      },
      120_000,
      500,
    );

    await inBatches(names, (n) => world.deleteWidget(n));
    await eventually(
      () => expect(operator.cache.list(WIDGET, { namespace: world.namespace })).toHaveLength(1),
      120_000,
      500,
    );
    await eventually(async () => expect(await tracked(registry)).toBe(baseline), 30_000, 200);
  }, 300_000);
});

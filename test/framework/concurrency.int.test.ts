import 'reflect-metadata';
import { inject } from 'tsyringe';
import { controller, onCreate, onUpdate, type HandlerContext, type Operator } from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { eventually, HANDLED, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

class Gauge {
  running = new Map<string, number>();
  total = 0;
  maxTotal = 0;
  maxPerObject = 0;
  lastSize = new Map<string, number | undefined>();
  runs = 0;
}
const GAUGE = Symbol('gauge');

@controller({ ...WIDGET, maxConcurrentReconciles: 3 })
class Slow {
  constructor(@inject(GAUGE) private readonly g: Gauge) {}

  @onCreate() @onUpdate() async reconcile(ctx: HandlerContext<Widget>) {
    const name = ctx.object.metadata.name!;
    const g = this.g;
    g.runs++;
    g.running.set(name, (g.running.get(name) ?? 0) + 1);
    g.total++;
    g.maxPerObject = Math.max(g.maxPerObject, g.running.get(name)!);
    g.maxTotal = Math.max(g.maxTotal, g.total);
    await new Promise((r) => setTimeout(r, 150));
    g.lastSize.set(name, ctx.object.spec.size);
    g.running.set(name, g.running.get(name)! - 1);
    g.total--;
  }
}

describe('work queue against the API server', () => {
  let world: WidgetWorld;
  let gauge: Gauge;
  let operator: Operator;

  beforeEach(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-conc');
    gauge = new Gauge();
    operator = world.operator([Slow], (c) => c.register(GAUGE, { useValue: gauge }));
    await operator.start();
  });
  afterEach(() => operator.stop());

  it('serializes handlers per object under a burst of 50 updates, ending on the latest generation', async () => {
    await world.createWidget('burst', { size: 0 });
    await eventually(() => expect(gauge.lastSize.get('burst')).toBe(0));
    for (let i = 1; i <= 50; i++) await world.patchSpec('burst', { size: i });
    await eventually(async () =>
      expect((await world.getWidget('burst')).metadata.annotations?.[HANDLED]).toBe('51'),
    );
    expect(gauge.lastSize.get('burst')).toBe(50);
    expect(gauge.maxPerObject).toBe(1);
    expect(gauge.runs).toBeLessThan(51); // queued changes were coalesced
  });

  it('runs at most maxConcurrentReconciles objects at once across 20 objects', async () => {
    await Promise.all(Array.from({ length: 20 }, (_, i) => world.createWidget(`w${i}`, { size: i })));
    await eventually(() => expect(gauge.lastSize.size).toBe(20));
    expect(gauge.maxTotal).toBe(3);
    expect(gauge.maxPerObject).toBe(1);
  });
});

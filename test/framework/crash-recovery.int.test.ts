import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  isStatus,
  onCreate,
  onResume,
  onUpdate,
  type HandlerContext,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, HANDLED, WidgetWorld, WIDGET, type Widget } from './widget-world.js';

/** The outside world the handler changes: ConfigMaps it creates, counted per successful create. */
class SideEffects {
  created = new Map<string, number>();
  hanging = new Set<string>();
  hangOnce = true;
  constructor(readonly world: WidgetWorld) {}
}
const EFFECTS = Symbol('effects');

@controller({ ...WIDGET })
class Provisioner {
  constructor(
    @inject(CALLS) private readonly calls: Calls,
    @inject(EFFECTS) private readonly fx: SideEffects,
  ) {}

  @onCreate() @onUpdate() @onResume() async reconcile(ctx: HandlerContext<Widget>) {
    const name = ctx.object.metadata.name!;
    this.calls.record(ctx.cause, ctx.object);
    if (ctx.cause === 'resume') return;
    // Idempotent by construction: the side effect is named after the object and "exists" counts as done.
    try {
      await this.fx.world.client.request('POST', `/api/v1/namespaces/${this.fx.world.namespace}/configmaps`, {
        body: { metadata: { name: `${name}-effect` }, data: { owner: name } },
        signal: ctx.signal,
      });
      this.fx.created.set(name, (this.fx.created.get(name) ?? 0) + 1);
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
    }
    if (ctx.object.spec.fail === 'hang' && this.fx.hangOnce) {
      this.fx.hanging.add(name);
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      throw new Error('killed mid-handler');
    }
  }
}

describe('crash recovery', () => {
  it('a killed operator, restarted later, converges without repeating completed work or side effects', async () => {
    const world = await WidgetWorld.create(testKubeConfig(), 'fw-crash');
    const calls = new Calls();
    const fx = new SideEffects(world);
    const make = () =>
      world.operator([Provisioner], (c) => {
        c.register(CALLS, { useValue: calls });
        c.register(EFFECTS, { useValue: fx });
      });

    const first: Operator = make();
    await first.start();
    await world.createWidget('done');
    await eventually(async () =>
      expect((await world.getWidget('done')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    await world.createWidget('mid', { fail: 'hang' });
    await eventually(() => expect(fx.hanging).toContain('mid'));

    await first.kill(); // the side effect happened, the marker was not written
    const mid = await world.getWidget('mid');
    expect(mid.metadata.annotations?.[HANDLED]).toBeUndefined();

    fx.hangOnce = false;
    const second = make();
    await second.start();
    try {
      await eventually(async () =>
        expect((await world.getWidget('mid')).metadata.annotations?.[HANDLED]).toBe('1'),
      );
      await eventually(() => expect(calls.causes('done')).toEqual(['create', 'resume']));
      expect(calls.causes('mid')).toEqual(['create', 'create']); // re-run: it never completed
      expect(Object.fromEntries(fx.created)).toEqual({ done: 1, mid: 1 });
    } finally {
      await second.stop();
    }
  });
});

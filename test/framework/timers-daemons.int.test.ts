import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  daemon,
  onCreate,
  TemporaryError,
  timer,
  type HandlerContext,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

class DaemonLog {
  started: string[] = [];
  aborted: string[] = [];
}
const DAEMONS = Symbol('daemons');
/** Deletes a widget and resolves once the operator's cache no longer holds it. */
type Vanish = (name: string) => Promise<void>;
const VANISH = Symbol('vanish');

@controller({ ...WIDGET })
class Ticking {
  constructor(
    @inject(CALLS) private readonly calls: Calls,
    @inject(DAEMONS) private readonly daemons: DaemonLog,
    @inject(VANISH) private readonly vanish: Vanish,
  ) {}

  @onCreate() async created(ctx: HandlerContext<Widget>) {
    this.calls.record('create', ctx.object);
    // The deletion's watch event arrives while this handler still runs, and the handled-mark
    // patch that follows it finds no object.
    if (ctx.object.spec.fail === 'vanish-during-create') await this.vanish(ctx.object.metadata.name!);
  }

  @timer({ interval: (w: Widget) => w.spec.interval ?? 1, jitter: 0 }) async tick(
    ctx: HandlerContext<Widget>,
  ) {
    this.calls.record('timer', ctx.object);
  }

  @daemon({ backoff: 0.5 }) async watch(ctx: HandlerContext<Widget>) {
    const name = ctx.object.metadata.name!;
    this.daemons.started.push(name);
    if (ctx.object.spec.fail === 'daemon' && this.daemons.started.filter((n) => n === name).length === 1) {
      throw new TemporaryError('warming up', 0.5);
    }
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
    this.daemons.aborted.push(name);
  }
}

describe('timers and daemons', () => {
  let world: WidgetWorld;
  let calls: Calls;
  let daemons: DaemonLog;
  let operator: Operator;

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-timers');
    calls = new Calls();
    daemons = new DaemonLog();
    operator = world.operator([Ticking], (c) => {
      c.register(CALLS, { useValue: calls });
      c.register(DAEMONS, { useValue: daemons });
      c.register(VANISH, {
        useValue: async (name: string) => {
          await world.deleteWidget(name);
          await eventually(() => expect(operator.cache.get(WIDGET, world.namespace, name)).toBeUndefined());
        },
      });
    });
    await operator.start();
  });
  afterAll(() => operator.stop());

  it('fires a timer at the interval computed from the object, and stops it on deletion', async () => {
    await world.createWidget('tick', { interval: 1.5 });
    await eventually(() => expect(calls.of('tick', 'timer').length).toBeGreaterThanOrEqual(3));
    const times = calls.of('tick', 'timer').map((c) => c.at);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(1400);

    await world.deleteWidget('tick');
    await eventually(() => expect(operator.cache.get(WIDGET, world.namespace, 'tick')).toBeUndefined());
    await eventually(() => expect(daemons.aborted).toContain('tick'));
    const count = calls.of('tick', 'timer').length;
    await new Promise((r) => setTimeout(r, 3000));
    expect(calls.of('tick', 'timer')).toHaveLength(count);
  });

  it('aborts a daemon through its signal when its object is deleted', async () => {
    await world.createWidget('d1');
    await eventually(() => expect(daemons.started).toContain('d1'));
    expect(daemons.aborted).not.toContain('d1');
    await world.deleteWidget('d1');
    await eventually(() => expect(daemons.aborted).toContain('d1'));
  });

  it('aborts the daemon of an object deleted while its create handler still ran', async () => {
    await world.createWidget('gone-early', { fail: 'vanish-during-create' });
    await eventually(() => expect(calls.of('gone-early', 'create')).toHaveLength(1));
    await eventually(() => expect(daemons.aborted).toContain('gone-early'));
  });

  it('restarts a daemon that threw a TemporaryError', async () => {
    await world.createWidget('flaky', { fail: 'daemon' });
    await eventually(() => expect(daemons.started.filter((n) => n === 'flaky')).toHaveLength(2));
  });

  it('aborts every daemon on shutdown and stops the timers', async () => {
    await world.createWidget('d2', { interval: 1 });
    await eventually(() => expect(daemons.started).toContain('d2'));
    await operator.stop();
    expect(daemons.aborted).toEqual(expect.arrayContaining(['d2', 'flaky']));
    const count = calls.log.length;
    await new Promise((r) => setTimeout(r, 2000));
    expect(calls.log).toHaveLength(count);
  });
});

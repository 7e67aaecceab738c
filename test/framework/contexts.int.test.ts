import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  daemon,
  onCreate,
  onUpdate,
  timer,
  type HandlerContext,
  type HandlerResult,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

class SleepLog {
  naps = new Map<string, number>();
  /** What ctx.sleep answered once the daemon's object was deleted. */
  lastAnswer = new Map<string, boolean>();
  stopped: string[] = [];
}
const SLEEPS = Symbol('sleeps');

/** spec.fail picks the behaviour: 'timer-requeue', 'daemon-requeue', 'sleeper', 'waiter'. */
@controller({ ...WIDGET })
class Contexts {
  /** The timer interval, read from the handler at each run (as from settings). */
  readonly tickSeconds = 0.5;

  constructor(
    @inject(CALLS) private readonly calls: Calls,
    @inject(SLEEPS) private readonly sleeps: SleepLog,
  ) {}

  @onCreate() @onUpdate() async reconcile(ctx: HandlerContext<Widget>) {
    this.calls.record(ctx.cause, ctx.object);
  }

  @timer({ interval: (_w, self: Contexts) => self.tickSeconds, jitter: 0 })
  async tick(ctx: HandlerContext<Widget>): Promise<HandlerResult | void> {
    this.calls.record('timer', ctx.object);
    if (
      ctx.object.spec.fail === 'timer-requeue' &&
      this.calls.of(ctx.object.metadata.name!, 'timer').length === 1
    )
      return { requeueAfter: 0.2 };
  }

  @daemon() async watch(ctx: HandlerContext<Widget>) {
    const name = ctx.object.metadata.name!;
    switch (ctx.object.spec.fail) {
      case 'daemon-requeue':
        ctx.requeue();
        return;
      case 'sleeper': {
        let answer = true;
        while (answer) {
          answer = await ctx.sleep(100);
          this.sleeps.naps.set(name, (this.sleeps.naps.get(name) ?? 0) + 1);
        }
        this.sleeps.lastAnswer.set(name, answer);
        return;
      }
      case 'waiter':
        await ctx.stopped;
        this.sleeps.stopped.push(name);
        return;
    }
  }
}

describe('handler contexts', () => {
  let world: WidgetWorld;
  let calls: Calls;
  let sleeps: SleepLog;
  let operator: Operator;

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-contexts');
    calls = new Calls();
    sleeps = new SleepLog();
    operator = world.operator([Contexts], (c) => {
      c.register(CALLS, { useValue: calls });
      c.register(SLEEPS, { useValue: sleeps });
    });
    await operator.start();
  });
  afterAll(() => operator.stop());

  it('runs a timer at an interval taken from the handler instance', async () => {
    await world.createWidget('interval');
    await eventually(() => expect(calls.of('interval', 'timer').length).toBeGreaterThanOrEqual(3));
    const times = calls.of('interval', 'timer').map((c) => c.at);
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(450);
    await world.deleteWidget('interval');
  });

  it('hands the object to the work queue when a timer returns requeueAfter', async () => {
    await world.createWidget('timer-requeue', { fail: 'timer-requeue' });
    await eventually(() => expect(calls.causes('timer-requeue')).toContain('update'));
    const firstTimer = calls.of('timer-requeue', 'timer')[0].at;
    expect(calls.of('timer-requeue', 'update')[0].at - firstTimer).toBeGreaterThanOrEqual(180);
    await world.deleteWidget('timer-requeue');
  });

  it('hands the object to the work queue when a daemon calls ctx.requeue()', async () => {
    await world.createWidget('daemon-requeue', { fail: 'daemon-requeue' });
    await eventually(() => expect(calls.causes('daemon-requeue')).toContain('update'));
    await world.deleteWidget('daemon-requeue');
  });

  it('ends ctx.sleep early and resolves ctx.stopped when the object is deleted', async () => {
    await world.createWidget('sleeper', { fail: 'sleeper' });
    await world.createWidget('waiter', { fail: 'waiter' });
    await eventually(() => expect(sleeps.naps.get('sleeper') ?? 0).toBeGreaterThanOrEqual(3));
    expect(sleeps.stopped).toEqual([]);
    await world.deleteWidget('sleeper');
    await world.deleteWidget('waiter');
    await eventually(() => expect(sleeps.lastAnswer.get('sleeper')).toBe(false));
    await eventually(() => expect(sleeps.stopped).toEqual(['waiter']));
  });
});

import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  onCreate,
  onUpdate,
  PermanentError,
  TemporaryError,
  type HandlerContext,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, GROUP, HANDLED, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

const PERMANENT = `${GROUP}/permanent-failure-generation`;

/**
 * spec.fail picks the failure: 'temporary' (twice), 'permanent', 'permanent-once', 'plain' (four times),
 * 'requeue' (once), 'status-then-wait' and 'status-then-error' (write status, then fail).
 */
@controller({ ...WIDGET })
class Failing {
  constructor(@inject(CALLS) private readonly calls: Calls) {}

  @onCreate() @onUpdate() async reconcile(ctx: HandlerContext<Widget>) {
    this.calls.record(ctx.cause, ctx.object);
    const attempts = this.calls.of(ctx.object.metadata.name!).length;
    switch (ctx.object.spec.fail) {
      case 'temporary':
        if (attempts <= 2) throw new TemporaryError('not yet', 1);
        return;
      case 'permanent':
        throw new PermanentError('spec.size must be even');
      case 'permanent-once':
        if (attempts <= 1) throw new PermanentError('needs a person');
        return;
      case 'plain':
        if (attempts <= 4) throw new Error('boom');
        return;
      case 'requeue':
        return attempts <= 1 ? { requeueAfter: 1 } : undefined;
      case 'status-then-wait':
        // Records the problem in status (a watch event of its own), then asks to wait.
        await ctx.status.patch({ attempts });
        if (attempts <= 1) throw new TemporaryError('quota exhausted', 3);
        return;
      case 'status-then-error':
        await ctx.status.patch({ attempts });
        if (attempts <= 2) throw new Error('boom');
        return;
    }
  }
}

const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]);

describe('handler errors', () => {
  let world: WidgetWorld;
  let calls: Calls;
  let operator: Operator;

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-errors');
    calls = new Calls();
    operator = world.operator([Failing], (c) => c.register(CALLS, { useValue: calls }), {
      queue: { backoffBaseMs: 250, backoffMaxMs: 10_000 },
    });
    await operator.start();
  });
  afterAll(() => operator.stop());

  it('retries a TemporaryError after its delay, for the same cause, then records success', async () => {
    await world.createWidget('temporary', { fail: 'temporary' });
    await eventually(async () =>
      expect((await world.getWidget('temporary')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    const runs = calls.of('temporary');
    expect(runs.map((c) => c.cause)).toEqual(['create', 'create', 'create']);
    for (const gap of gaps(runs.map((c) => c.at))) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it('re-runs a handler that returned requeueAfter, and only then records success', async () => {
    await world.createWidget('requeue', { fail: 'requeue' });
    await eventually(async () =>
      expect((await world.getWidget('requeue')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    const runs = calls.of('requeue');
    expect(runs.map((c) => c.cause)).toEqual(['create', 'create']);
    expect(runs[1].at - runs[0].at).toBeGreaterThanOrEqual(950);
  });

  it('backs a plain error off exponentially', async () => {
    await world.createWidget('plain', { fail: 'plain' });
    await eventually(async () =>
      expect((await world.getWidget('plain')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    const g = gaps(calls.of('plain').map((c) => c.at));
    expect(g).toHaveLength(4);
    // Lower bounds only: a loaded machine can make retries later, never earlier.
    [250, 500, 1000, 2000].forEach((min, i) => expect(g[i]).toBeGreaterThanOrEqual(min * 0.9));
  });

  it.each([
    ['a TemporaryError delay', 'status-then-wait', [2850]],
    ['an error backoff', 'status-then-error', [225, 450]],
  ])('never cuts %s short because the handler wrote status', async (_what, fail, minGaps) => {
    const name = fail;
    await world.createWidget(name, { fail });
    await eventually(async () =>
      expect((await world.getWidget(name)).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    const g = gaps(calls.of(name).map((c) => c.at));
    expect(g).toHaveLength(minGaps.length);
    minGaps.forEach((min, i) => expect(g[i]).toBeGreaterThanOrEqual(min));
  });

  it('stops retrying a PermanentError until the generation changes, and posts a Warning Event', async () => {
    await world.createWidget('permanent', { fail: 'permanent' });
    await eventually(async () => {
      const events = await world.events('permanent');
      expect(events).toEqual([
        expect.objectContaining({
          type: 'Warning',
          reason: 'HandlerFailed',
          message: expect.stringContaining('spec.size must be even'),
        }),
      ]);
    });
    await eventually(async () =>
      expect((await world.getWidget('permanent')).metadata.annotations?.[PERMANENT]).toBe('1'),
    );
    await new Promise((r) => setTimeout(r, 1500));
    expect(calls.of('permanent')).toHaveLength(1);

    await world.patchSpec('permanent', { fail: 'none' });
    await eventually(async () => {
      const w = await world.getWidget('permanent');
      expect(w.metadata.annotations?.[HANDLED]).toBe('2');
      expect(w.metadata.annotations?.[PERMANENT]).toBeUndefined();
    });
    expect(calls.causes('permanent')).toEqual(['create', 'create']); // never handled, so still a create
  });

  it('retries the same generation once a person removes the permanent-failure annotation (no restart)', async () => {
    await world.createWidget('cleared', { fail: 'permanent-once' });
    await eventually(async () =>
      expect((await world.getWidget('cleared')).metadata.annotations?.[PERMANENT]).toBe('1'),
    );
    // The cache shows the annotation before the person removes it.
    await eventually(() =>
      expect(operator.cache.get(WIDGET, world.namespace, 'cleared')?.metadata.annotations?.[PERMANENT]).toBe(
        '1',
      ),
    );
    expect(calls.of('cleared')).toHaveLength(1);

    await world.patchAnnotations('cleared', { [PERMANENT]: null });
    await eventually(async () => {
      const w = await world.getWidget('cleared');
      expect(w.metadata.annotations?.[HANDLED]).toBe('1');
      expect(w.metadata.annotations?.[PERMANENT]).toBeUndefined();
    });
    expect(calls.causes('cleared')).toEqual(['create', 'create']);
  });
});

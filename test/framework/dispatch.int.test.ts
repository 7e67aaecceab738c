import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  onCreate,
  onDelete,
  onResume,
  onUpdate,
  watches,
  type HandlerContext,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import {
  CONFIGMAP,
  eventually,
  FINALIZER,
  HANDLED,
  WIDGET,
  WidgetWorld,
  type Widget,
} from './widget-world.js';

@controller({ ...WIDGET, finalizer: FINALIZER, when: (w: Widget) => !w.spec.skip })
@watches({
  ...CONFIGMAP,
  labelSelector: 'widget',
  map: (cm) => [{ namespace: cm.metadata.namespace, name: cm.metadata.labels!.widget }],
})
class Widgets {
  constructor(@inject(CALLS) private readonly calls: Calls) {}

  @onCreate() @onUpdate() @onResume() async reconcile(ctx: HandlerContext<Widget>) {
    this.calls.record(ctx.cause, ctx.object);
    await ctx.status.patch({ observedGeneration: ctx.object.metadata.generation });
  }

  @onDelete() async cleanup(ctx: HandlerContext<Widget>) {
    this.calls.record('delete', ctx.object);
    // Writing the object makes the copy the handler got stale before the finalizer is released.
    if (ctx.object.metadata.labels?.['writes-on-delete']) await ctx.status.patch({ phase: 'Deleting' });
  }
}

describe('dispatch by cause (level-triggered, from the object state)', () => {
  let world: WidgetWorld;
  let calls: Calls;
  let operator: Operator;
  const start = async () => {
    operator = world.operator([Widgets], (c) => c.register(CALLS, { useValue: calls }), {
      probeAddress: { host: '127.0.0.1', port: 0 },
    });
    await operator.start();
  };

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-dispatch');
    calls = new Calls();
    await start();
  });
  afterAll(async () => {
    await operator.stop();
  });

  it('runs create once for a new object, after adding the finalizer, and records the handled generation', async () => {
    await world.createWidget('a', { size: 1 });
    await eventually(async () => {
      const w = await world.getWidget('a');
      expect(w.metadata.annotations?.[HANDLED]).toBe('1');
      expect(w.metadata.finalizers).toEqual([FINALIZER]);
      expect(w.status?.observedGeneration).toBe(1);
    });
    expect(calls.causes('a')).toEqual(['create']);
  });

  it('runs update on a spec (generation) change, but not on a status write', async () => {
    await world.patchStatus('a', { note: 'written by someone else' });
    await eventually(() =>
      expect(operator.cache.get<Widget>(WIDGET, world.namespace, 'a')?.status?.note).toBeDefined(),
    );
    await world.patchSpec('a', { size: 2 });
    await eventually(() => expect(calls.of('a', 'update').map((c) => c.generation)).toEqual([2]));
    await eventually(async () =>
      expect((await world.getWidget('a')).metadata.annotations?.[HANDLED]).toBe('2'),
    );
    // The handler's own status write (observedGeneration: 2) has reached the cache by now.
    await eventually(() =>
      expect(operator.cache.get<Widget>(WIDGET, world.namespace, 'a')?.status?.observedGeneration).toBe(2),
    );
    await new Promise((r) => setTimeout(r, 1000));
    expect(calls.causes('a')).toEqual(['create', 'update']);
  });

  it('maps a change of a watched kind (@watches) to an update of the primary object', async () => {
    await world.createConfigMap('cm-a', { k: 'v' }, { widget: 'a' });
    await eventually(() => expect(calls.of('a', 'update')).toHaveLength(2));
    expect(calls.of('a', 'update')[1].generation).toBe(2); // generation unchanged: a triggered update
    expect(operator.cache.get(CONFIGMAP, world.namespace, 'cm-a')).toBeDefined();
  });

  it('runs update for Operator.trigger() without a generation change', async () => {
    operator.trigger(WIDGET, world.namespace, 'a');
    await eventually(() => expect(calls.of('a', 'update')).toHaveLength(3));
  });

  it('never touches objects the `when` filter rejects: no finalizer, no marker, no handler', async () => {
    await world.createWidget('skipped', { skip: true });
    await world.createWidget('barrier');
    await eventually(() => expect(calls.causes('barrier')).toEqual(['create']));
    await new Promise((r) => setTimeout(r, 500));
    const w = await world.getWidget('skipped');
    expect(w.metadata.finalizers).toBeUndefined();
    expect(w.metadata.annotations).toBeUndefined();
    expect(calls.of('skipped')).toEqual([]);
  });

  it('runs resume (not create) for already-handled objects after an operator restart', async () => {
    await operator.stop();
    await world.patchSpec('barrier', { size: 5 }); // changed while no operator ran
    await start();
    await eventually(() => expect(calls.causes('a')).toContain('resume'));
    await eventually(() => expect(calls.of('barrier', 'update').map((c) => c.generation)).toEqual([2]));
    expect(calls.of('a', 'create')).toHaveLength(1);
    expect(calls.of('barrier', 'resume')).toEqual([]); // an update due is an update, not a resume
    expect(calls.of('skipped')).toEqual([]);
  });

  it('runs delete handlers on deletion, then removes the finalizer so the object goes away', async () => {
    await world.deleteWidget('a');
    await eventually(() => world.gone('a'));
    expect(calls.causes('a').at(-1)).toBe('delete');
    expect(calls.of('a', 'delete')).toHaveLength(1);
  });

  it('runs the delete handlers once even when they write the object before its release', async () => {
    await world.createWidget('writer', {}, { 'writes-on-delete': 'yes' });
    await eventually(async () =>
      expect((await world.getWidget('writer')).metadata.annotations?.[HANDLED]).toBe('1'),
    );
    await world.deleteWidget('writer');
    await eventually(() => world.gone('writer'));
    expect(calls.causes('writer')).toEqual(['create', 'delete']);
  });

  it('still releases an object that held the finalizer and later stopped matching the filter', async () => {
    await world.createWidget('leaver');
    await eventually(async () =>
      expect((await world.getWidget('leaver')).metadata.finalizers).toEqual([FINALIZER]),
    );
    await world.patchSpec('leaver', { skip: true });
    await world.deleteWidget('leaver');
    await eventually(() => world.gone('leaver'));
    expect(calls.causes('leaver')).toEqual(['create', 'delete']);
  });

  it('serves /healthz, /readyz and the injected registry on /metrics', async () => {
    const base = `http://127.0.0.1:${operator.probePort}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(
      /operator_framework_reconciles_total\{kind="Widget",cause="resume",result="success"\} \d+/,
    );
    expect(metrics).toContain('operator_framework_reconcile_duration_seconds_bucket');
    expect(metrics).toContain('operator_framework_queue_depth');
    // Handlers above patched status (observedGeneration): each write that reached the server counts.
    expect(metrics).toMatch(/operator_framework_status_writes_total\{kind="Widget"\} [1-9]\d*/);
  });
});

describe('namespace scope', () => {
  it('an operator given a namespace neither sees nor touches objects in other namespaces', async () => {
    const mine = await WidgetWorld.create(testKubeConfig(), 'fw-scope-in');
    const other = await WidgetWorld.create(testKubeConfig(), 'fw-scope-out');
    const calls = new Calls();
    const operator = mine.operator([Widgets], (c) => c.register(CALLS, { useValue: calls }));
    await operator.start();
    try {
      await other.createWidget('outsider');
      await mine.createWidget('insider');
      await eventually(() => expect(calls.causes('insider')).toEqual(['create']));
      await new Promise((r) => setTimeout(r, 500));
      expect(calls.of('outsider')).toEqual([]);
      expect(operator.cache.get(WIDGET, other.namespace, 'outsider')).toBeUndefined();
      expect((await other.getWidget('outsider')).metadata.finalizers).toBeUndefined();
    } finally {
      await operator.stop();
    }
  });
});

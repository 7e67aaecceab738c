// A kind watched with several label selectors (one cache view each) and ctx.createOwned,
// against the real API server of the framework's testing control plane.
import 'reflect-metadata';
import { inject } from 'tsyringe';
import {
  controller,
  isStatus,
  onCreate,
  onUpdate,
  watches,
  type CacheReader,
  type HandlerContext,
  type KindRef,
  type KubeObject,
  type Operator,
} from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { CONFIGMAP, eventually, GROUP, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

// Two views of ConfigMaps: one selector cannot say "this label or that one".
const RED: KindRef = { ...CONFIGMAP, labelSelector: 'colour=red' };
const BLUE: KindRef = { ...CONFIGMAP, labelSelector: 'colour=blue' };
const toWidget = (cm: KubeObject) => [{ namespace: cm.metadata.namespace, name: cm.metadata.labels!.widget }];

class Seen {
  /** Per widget, the names each view held when its handler last ran. */
  views = new Map<string, { red: string[]; blue: string[] }>();
  /** What createOwned resolved with, or the status it was rejected with. */
  created = new Map<string, KubeObject>();
  conflicts = new Map<string, number>();
}
const SEEN = Symbol('seen');

const names = (cache: CacheReader, kind: KindRef) =>
  cache
    .list(kind)
    .map((o) => o.metadata.name!)
    .sort();

@controller({ ...WIDGET })
@watches({ ...RED, map: toWidget })
@watches({ ...BLUE, map: toWidget })
class Owner {
  constructor(
    @inject(CALLS) private readonly calls: Calls,
    @inject(SEEN) private readonly seen: Seen,
  ) {}

  @onCreate() @onUpdate() async reconcile(ctx: HandlerContext<Widget>) {
    const name = ctx.object.metadata.name!;
    this.calls.record(ctx.cause, ctx.object);
    this.seen.views.set(name, { red: names(ctx.cache, RED), blue: names(ctx.cache, BLUE) });
    if (ctx.object.spec.fail !== 'own') return;
    try {
      const child = await ctx.createOwned(CONFIGMAP, {
        metadata: { name: `${name}-child` },
        data: { k: 'v' },
      });
      this.seen.created.set(name, child);
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
      this.seen.conflicts.set(name, (this.seen.conflicts.get(name) ?? 0) + 1);
    }
  }
}

describe('a kind watched with several label selectors, and owned children', () => {
  let world: WidgetWorld;
  let calls: Calls;
  let seen: Seen;
  let operator: Operator;

  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-views');
    calls = new Calls();
    seen = new Seen();
    operator = world.operator([Owner], (c) => {
      c.register(CALLS, { useValue: calls });
      c.register(SEEN, { useValue: seen });
    });
    await operator.start();
  });
  afterAll(() => operator.stop());

  it('keeps one cache view per selector, each holding only what its selector matches', async () => {
    await world.createWidget('w');
    await world.createConfigMap('r1', { k: 'v' }, { colour: 'red', widget: 'w' });
    await world.createConfigMap('b1', { k: 'v' }, { colour: 'blue', widget: 'w' });
    await world.createConfigMap('green', { k: 'v' }, { colour: 'green', widget: 'w' });
    await eventually(() => {
      expect(names(operator.cache, RED)).toEqual(['r1']);
      expect(names(operator.cache, BLUE)).toEqual(['b1']);
    });
    expect(operator.cache.get(RED, world.namespace, 'b1')).toBeUndefined();
    // Without a selector the reader would not know which view it meant.
    expect(() => operator.cache.list(CONFIGMAP)).toThrow(/several label selectors/);
    // Each view triggers the controller, and the handler reads both.
    await eventually(() => expect(seen.views.get('w')).toEqual({ red: ['r1'], blue: ['b1'] }));
  });

  it('triggers the controller from a change in either view', async () => {
    const before = calls.of('w', 'update').length;
    await world.patchConfigMap('b1', { k: 'changed' });
    await eventually(() => expect(calls.of('w', 'update').length).toBeGreaterThan(before));
    const afterBlue = calls.of('w', 'update').length;
    await world.createConfigMap('r2', { k: 'v' }, { colour: 'red', widget: 'w' });
    await eventually(() => expect(seen.views.get('w')?.red).toEqual(['r1', 'r2']));
    expect(calls.of('w', 'update').length).toBeGreaterThan(afterBlue);
  });

  it('createOwned makes the child in the owner namespace with a controller ownerReference', async () => {
    const owner = await world.createWidget('parent', { fail: 'own' });
    await eventually(() => expect(seen.created.get('parent')).toBeDefined());
    const child = seen.created.get('parent')!;
    expect(child.metadata.namespace).toBe(world.namespace);
    expect(child.metadata.uid).toBeDefined();
    const stored = await world.client.request<KubeObject & { metadata: { ownerReferences?: unknown[] } }>(
      'GET',
      `/api/v1/namespaces/${world.namespace}/configmaps/parent-child`,
    );
    expect(stored.metadata.ownerReferences).toEqual([
      {
        apiVersion: `${GROUP}/v1`,
        kind: 'Widget',
        name: 'parent',
        uid: owner.metadata.uid,
        controller: true,
        blockOwnerDeletion: false,
      },
    ]);
  });

  it('createOwned rejects with 409 when the child exists already', async () => {
    operator.trigger(WIDGET, world.namespace, 'parent');
    await eventually(() => expect(seen.conflicts.get('parent')).toBeGreaterThanOrEqual(1));
  });
});

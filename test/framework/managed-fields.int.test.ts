import 'reflect-metadata';
import { inject } from 'tsyringe';
import { controller, onCreate, type HandlerContext } from '../../framework/index.js';
import { testKubeConfig } from '../harness/kube.js';
import { eventually, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

const SEEN = Symbol('seen-metadata');
type Seen = Map<string, Record<string, unknown>>;

@controller({ ...WIDGET })
class MetadataRecorder {
  constructor(@inject(SEEN) private readonly seen: Seen) {}

  @onCreate() async created(ctx: HandlerContext<Widget>) {
    this.seen.set(ctx.object.metadata.name ?? '', { ...ctx.object.metadata });
  }
}

// Memory: managedFields were the largest part of each cached object (docs/benchmarks.md).
describe('the informer cache', () => {
  it('keeps no managedFields, from the first list or from the watch', async () => {
    const world = await WidgetWorld.create(testKubeConfig(), 'fw-managed-fields');
    const stored = await world.createWidget('listed');
    expect(stored.metadata).toHaveProperty('managedFields');
    const seen: Seen = new Map();
    const operator = world.operator([MetadataRecorder], (c) => c.register(SEEN, { useValue: seen }));
    await operator.start();
    try {
      await world.createWidget('watched');
      await eventually(() => expect([...seen.keys()].sort()).toEqual(['listed', 'watched']), 20_000);
      for (const metadata of seen.values()) {
        expect(metadata).not.toHaveProperty('managedFields');
        expect(metadata).toHaveProperty('resourceVersion');
      }
    } finally {
      await operator.stop();
    }
  });
});

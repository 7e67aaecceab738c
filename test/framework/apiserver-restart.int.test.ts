import 'reflect-metadata';
import { inject } from 'tsyringe';
import { controller, onCreate, onUpdate, type HandlerContext, type Operator } from '../../framework/index.js';
import { ControlPlane } from '../../framework/testing/control-plane.js';
import { CONTROL_PLANE_DIR_PREFIX } from '../harness/kube.js';
import { Calls, CALLS } from './calls.js';
import { eventually, HANDLED, WIDGET, WidgetWorld, type Widget } from './widget-world.js';

@controller({ ...WIDGET })
class Recorder {
  constructor(@inject(CALLS) private readonly calls: Calls) {}

  @onCreate() @onUpdate() async reconcile(ctx: HandlerContext<Widget>) {
    this.calls.record(ctx.cause, ctx.object);
  }
}

// Its own control plane: stopping the shared API server would break every other suite.
describe('API server outage', () => {
  let cp: ControlPlane;
  let operator: Operator | undefined;

  beforeAll(async () => {
    cp = await ControlPlane.start({ dirPrefix: CONTROL_PLANE_DIR_PREFIX });
  }, 90_000);
  afterAll(async () => {
    await operator?.stop();
    await cp.stop();
  }, 60_000);

  it('recovers without a restart after the API server was down for 15 s, and handles changes made afterwards', async () => {
    const world = await WidgetWorld.create(cp.kubeConfig(), 'fw-outage');
    const calls = new Calls();
    operator = world.operator([Recorder], (c) => c.register(CALLS, { useValue: calls }), {
      watchRetryMaxSeconds: 2,
    });
    await operator.start();
    await world.createWidget('before');
    await eventually(() => expect(calls.causes('before')).toEqual(['create']));

    await cp.stopApiServer();
    await new Promise((r) => setTimeout(r, 15_000));
    await cp.startApiServer();

    await world.patchSpec('before', { size: 2 });
    await world.createWidget('after');
    await eventually(async () => {
      expect((await world.getWidget('after')).metadata.annotations?.[HANDLED]).toBe('1');
      expect((await world.getWidget('before')).metadata.annotations?.[HANDLED]).toBe('2');
    }, 60_000);
    expect(calls.causes('before')).toEqual(['create', 'update']);
    expect(calls.causes('after')).toEqual(['create']);
  }, 120_000);
});

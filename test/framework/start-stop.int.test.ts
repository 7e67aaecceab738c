import 'reflect-metadata';
import { background, controller, daemon, onStartup, type OperatorContext } from '../../framework/index.js';
import { WIDGET, WidgetWorld } from './widget-world.js';
import { testKubeConfig } from '../harness/kube.js';

// The start/stop path of the framework's Operator (issue 11 items 8 and 10).
@controller({ ...WIDGET })
class Watching {}

const seen: { atStartup?: number } = {};

@background()
class Startup {
  @onStartup() count(ctx: OperatorContext) {
    seen.atStartup = ctx.cache.list(WIDGET).length;
  }

  /** A daemon that only stops when told: stop() must not wait for handlers before telling it. */
  @daemon() async forever(ctx: OperatorContext) {
    await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
  }
}

describe('Operator start and stop', () => {
  let world: WidgetWorld;
  beforeAll(async () => {
    world = await WidgetWorld.create(testKubeConfig(), 'fw-startstop');
    for (let i = 0; i < 5; i++) await world.createWidget(`w${i}`);
  });

  it("start() runs startup hooks only after the informers' first list, with the whole cache", async () => {
    const op = world.operator([Watching, Startup]);
    await op.start();
    try {
      expect(seen.atStartup).toBe(5);
      expect(op.cache.list(WIDGET)).toHaveLength(5);
    } finally {
      await op.stop();
    }
  });

  it('a stop() during start() wins: start returns, and the stop is quick', async () => {
    const op = world.operator([Watching, Startup]);
    const starting = op.start();
    const stoppedAt = Date.now();
    await op.stop();
    await starting;
    expect(Date.now() - stoppedAt).toBeLessThan(3_000);
    expect(op.isLeader()).toBe(false);
  });
});

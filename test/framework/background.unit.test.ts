import 'reflect-metadata';
import { pino } from 'pino';
import { BackgroundRunner } from '../../framework/core/background.js';
import { stoppable } from '../../framework/utils/sleep.js';
import {
  background,
  daemon,
  onCleanup,
  onStartup,
  onUpdate,
  timer,
  type OperatorContext,
} from '../../framework/index.js';
import { handlerMetadata } from '../../framework/core/registry.js';

const logger = pino({ level: 'silent' });
const context = (signal: AbortSignal): OperatorContext => ({
  ...stoppable(signal),
  logger,
  cache: { get: () => undefined, list: () => [], onChange: () => () => {} },
  trigger: () => {},
  isLeader: () => true,
});

function runnerFor(instance: object) {
  return new BackgroundRunner(
    [{ instance, metadata: handlerMetadata(instance.constructor as new () => object) }],
    context,
    logger,
  );
}

describe('BackgroundRunner', () => {
  it('runs startup and cleanup hooks in declaration order', async () => {
    const order: string[] = [];
    @background()
    class Hooks {
      @onStartup() async first() {
        order.push('first');
      }
      @onStartup() async second() {
        order.push('second');
      }
      @onCleanup() async bye() {
        order.push('bye');
      }
    }
    const runner = runnerFor(new Hooks());
    await runner.runHooks('startup', new AbortController().signal);
    await runner.runHooks('cleanup', new AbortController().signal);
    expect(order).toEqual(['first', 'second', 'bye']);
  });

  it('fails the start when a startup hook fails', async () => {
    @background()
    class Broken {
      @onStartup() async up() {
        throw new Error('no config');
      }
    }
    await expect(runnerFor(new Broken()).runHooks('startup', new AbortController().signal)).rejects.toThrow(
      'no config',
    );
  });

  it('runs leader-only work only after startLeaderOnly, everyReplica work from startEveryReplica, and stops both', async () => {
    const seen: string[] = [];
    @background()
    class Work {
      @timer({ interval: 0.02 }) async leaderTick() {
        seen.push('leader-timer');
      }
      @daemon({ everyReplica: true }) async everywhere(ctx: OperatorContext) {
        seen.push('replica-daemon');
        await new Promise((r) => ctx.signal.addEventListener('abort', r, { once: true }));
        seen.push('replica-daemon-stopped');
      }
    }
    const runner = runnerFor(new Work());
    const shutdown = new AbortController();
    runner.startEveryReplica(shutdown.signal);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toEqual(['replica-daemon']);
    runner.startLeaderOnly(shutdown.signal);
    await new Promise((r) => setTimeout(r, 200));
    expect(seen.filter((s) => s === 'leader-timer').length).toBeGreaterThanOrEqual(2);
    await runner.stopAll();
    const after = seen.length;
    expect(seen).toContain('replica-daemon-stopped');
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toHaveLength(after);
  });

  it('rejects resource handlers on a @background class with a clear error', () => {
    @background()
    class Misplaced {
      @onUpdate() async update() {}
    }
    expect(() => runnerFor(new Misplaced())).toThrow(/needs a @controller class/);
  });
});

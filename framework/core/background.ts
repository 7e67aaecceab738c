import type { Logger } from 'pino';
import { errorMessage } from '../utils/logger.js';
import { jittered, sleep } from '../utils/sleep.js';
import { PermanentError, TemporaryError } from './errors.js';
import type { ClassMetadata, DaemonOptions, TimerOptions } from './registry.js';
import type { OperatorContext } from './types.js';

type Hook = (ctx: OperatorContext) => Promise<void> | void;

type Task = { instance: object; method: string; leaderOnly: boolean } & (
  { kind: 'timer'; options: TimerOptions } | { kind: 'daemon'; options: DaemonOptions }
);

/** Operator-wide work from @background classes: startup/cleanup hooks, timers and daemons. */
export class BackgroundRunner {
  private readonly tasks: Task[] = [];
  private readonly hooks: Array<{ instance: object; method: string; type: 'startup' | 'cleanup' }> = [];
  private leaderRun?: { abort: AbortController; done: Promise<void>[] };
  private everyRun?: { abort: AbortController; done: Promise<void>[] };

  constructor(
    classes: Array<{ instance: object; metadata: ClassMetadata }>,
    private readonly context: (signal: AbortSignal) => OperatorContext,
    private readonly logger: Logger,
  ) {
    for (const { instance, metadata } of classes) {
      for (const m of metadata.methods) {
        if (m.type === 'startup' || m.type === 'cleanup')
          this.hooks.push({ instance, method: m.method, type: m.type });
        else if (m.type === 'timer') {
          if (typeof m.options.interval !== 'number')
            throw new Error(`@background timer ${m.method}: interval must be a number of seconds`);
          this.tasks.push({
            instance,
            method: m.method,
            kind: 'timer',
            options: m.options,
            leaderOnly: m.options.leaderOnly ?? true,
          });
        } else if (m.type === 'daemon') {
          this.tasks.push({
            instance,
            method: m.method,
            kind: 'daemon',
            options: m.options,
            leaderOnly: !m.options.everyReplica,
          });
        } else {
          throw new Error(
            `@background class: @${m.type === 'change' ? `on${m.cause}` : m.type} needs a @controller class`,
          );
        }
      }
    }
  }

  /** Runs the startup (or cleanup) hooks in order; a failing startup hook fails the start. */
  async runHooks(type: 'startup' | 'cleanup', signal: AbortSignal): Promise<void> {
    for (const h of this.hooks.filter((x) => x.type === type)) {
      try {
        await this.invoke(h.instance, h.method, signal);
      } catch (err) {
        if (type === 'startup') throw err;
        this.logger.warn({ method: h.method, err: errorMessage(err) }, 'cleanup hook failed');
      }
    }
  }

  /** Whether any timer or daemon runs on the leader alone. */
  get hasLeaderOnlyWork(): boolean {
    return this.tasks.some((t) => t.leaderOnly);
  }

  startEveryReplica(shutdown: AbortSignal): void {
    this.everyRun ??= this.launch(
      this.tasks.filter((t) => !t.leaderOnly),
      shutdown,
    );
  }

  startLeaderOnly(shutdown: AbortSignal): void {
    this.leaderRun ??= this.launch(
      this.tasks.filter((t) => t.leaderOnly),
      shutdown,
    );
  }

  async stopLeaderOnly(): Promise<void> {
    const run = this.leaderRun;
    this.leaderRun = undefined;
    run?.abort.abort();
    await Promise.all(run?.done ?? []);
  }

  async stopAll(): Promise<void> {
    const run = this.everyRun;
    this.everyRun = undefined;
    run?.abort.abort();
    await Promise.all([...(run?.done ?? []), this.stopLeaderOnly()]);
  }

  private launch(tasks: Task[], shutdown: AbortSignal): { abort: AbortController; done: Promise<void>[] } {
    const abort = new AbortController();
    const signal = AbortSignal.any([abort.signal, shutdown]);
    return {
      abort,
      done: tasks.map((t) => (t.kind === 'timer' ? this.runTimer(t, signal) : this.runDaemon(t, signal))),
    };
  }

  private async invoke(instance: object, method: string, signal: AbortSignal): Promise<void> {
    const fn = (instance as Record<string, Hook>)[method];
    await fn.call(instance, this.context(signal));
  }

  private async runTimer(t: Task & { kind: 'timer' }, signal: AbortSignal): Promise<void> {
    const interval = t.options.interval as number;
    await sleep((t.options.initialDelay ?? interval) * 1000, signal);
    while (!signal.aborted) {
      let delay = interval;
      try {
        await this.invoke(t.instance, t.method, signal);
      } catch (err) {
        if (err instanceof TemporaryError) delay = err.delaySeconds;
        this.logger.warn({ method: t.method, err: errorMessage(err) }, 'background timer failed');
      }
      await sleep(jittered(delay * 1000, t.options.jitter ?? 0), signal);
    }
  }

  private async runDaemon(t: Task & { kind: 'daemon' }, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.invoke(t.instance, t.method, signal);
        return;
      } catch (err) {
        if (signal.aborted || err instanceof PermanentError) {
          if (!signal.aborted)
            this.logger.error(
              { method: t.method, err: errorMessage(err) },
              'background daemon failed permanently',
            );
          return;
        }
        const delay = err instanceof TemporaryError ? err.delaySeconds : (t.options.backoff ?? 60);
        this.logger.warn(
          { method: t.method, err: errorMessage(err), restartInSeconds: delay },
          'background daemon failed, restarting',
        );
        await sleep(delay * 1000, signal);
      }
    }
  }
}

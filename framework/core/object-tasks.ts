import type { Logger } from 'pino';
import { errorMessage } from '../utils/logger.js';
import { jittered, sleep, untilDoneOrAborted } from '../utils/sleep.js';
import type { KeyedMutex } from '../utils/keyed-mutex.js';
import { PermanentError, TemporaryError } from './errors.js';
import type { DaemonOptions, TimerOptions } from './registry.js';
import type { Cause, HandlerResult, KubeObject } from './types.js';

export type Invoke = (
  method: string,
  object: KubeObject,
  cause: Cause,
  signal: AbortSignal,
) => Promise<unknown>;

export interface TaskHooks {
  /** The handler instance, passed to computed timer intervals. */
  handler?: object;
  /** Hands the object of `key` to the work queue after `seconds` (a timer returned requeueAfter). */
  requeue?: (key: string, seconds: number) => void;
}

interface Running {
  uid: string | undefined;
  abort: AbortController;
  done: Promise<void>[];
}

/**
 * The timers and daemons of each live object. Timers take the object's lock, so they never
 * overlap each other or the object's other handlers; daemons run beside them by design and
 * learn of deletion or shutdown through their signal.
 */
export class ObjectTasks {
  private readonly running = new Map<string, Running>();

  constructor(
    private readonly timers: Array<{ method: string; options: TimerOptions }>,
    private readonly daemons: Array<{ method: string; options: DaemonOptions }>,
    private readonly invoke: Invoke,
    private readonly current: (key: string) => KubeObject | undefined,
    private readonly lock: KeyedMutex,
    private readonly shutdown: AbortSignal,
    private readonly logger: Logger,
    private readonly hooks: TaskHooks = {},
  ) {}

  get empty(): boolean {
    return this.timers.length === 0 && this.daemons.length === 0;
  }

  /** Starts the object's tasks unless they already run for this very object (same uid). */
  async ensure(key: string, object: KubeObject): Promise<void> {
    if (this.empty || this.shutdown.aborted) return;
    const existing = this.running.get(key);
    if (existing?.uid === object.metadata.uid) return;
    if (existing) await this.stop(key);
    const abort = new AbortController();
    const signal = AbortSignal.any([abort.signal, this.shutdown]);
    const uid = object.metadata.uid;
    const done = [
      ...this.timers.map((t) => this.runTimer(key, uid, t.method, t.options, signal)),
      ...this.daemons.map((d) => this.runDaemon(key, object, d.method, d.options, signal)),
    ];
    this.running.set(key, { uid, abort, done });
  }

  keys(): IterableIterator<string> {
    return this.running.keys();
  }

  async stop(key: string): Promise<void> {
    const r = this.running.get(key);
    if (!r) return;
    this.running.delete(key);
    r.abort.abort();
    await Promise.all(r.done);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((k) => this.stop(k)));
  }

  private alive(key: string, uid: string | undefined): KubeObject | undefined {
    const obj = this.current(key);
    return obj && obj.metadata.uid === uid && !obj.metadata.deletionTimestamp ? obj : undefined;
  }

  private async runTimer(
    key: string,
    uid: string | undefined,
    method: string,
    options: TimerOptions,
    signal: AbortSignal,
  ) {
    const handler = this.hooks.handler ?? {};
    const seconds = (obj: KubeObject) =>
      typeof options.interval === 'number' ? options.interval : options.interval(obj, handler);
    const first = this.alive(key, uid);
    if (!first) return;
    await sleep((options.initialDelay ?? seconds(first)) * 1000, signal);
    while (!signal.aborted) {
      let delay: number | undefined;
      const turn = this.lock.run(key, async () => {
        const obj = this.alive(key, uid);
        if (!obj || signal.aborted) return;
        try {
          const result = (await this.invoke(method, obj, 'timer', signal)) as HandlerResult | void;
          if (result?.requeueAfter !== undefined && !signal.aborted)
            this.hooks.requeue?.(key, result.requeueAfter);
        } catch (err) {
          if (err instanceof TemporaryError) delay = err.delaySeconds;
          this.logger.warn({ key, method, err: errorMessage(err) }, 'timer handler failed');
        }
      });
      // Stopped while queued for the lock: whoever holds it may be the one awaiting this
      // timer's end (a delete stops the tasks under the lock). The queued turn returns at once.
      await untilDoneOrAborted(turn, signal);
      if (signal.aborted) return;
      const obj = this.alive(key, uid);
      if (!obj) return;
      await sleep(jittered((delay ?? seconds(obj)) * 1000, options.jitter ?? 0), signal);
    }
  }

  private async runDaemon(
    key: string,
    object: KubeObject,
    method: string,
    options: DaemonOptions,
    signal: AbortSignal,
  ) {
    while (!signal.aborted) {
      const obj = this.alive(key, object.metadata.uid);
      if (!obj) return;
      try {
        await this.invoke(method, obj, 'daemon', signal);
        return; // a daemon that returns by itself is finished, not restarted
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof PermanentError) {
          this.logger.error({ key, method, err: err.message }, 'daemon failed permanently');
          return;
        }
        const delay = err instanceof TemporaryError ? err.delaySeconds : (options.backoff ?? 60);
        this.logger.warn(
          { key, method, err: errorMessage(err), restartInSeconds: delay },
          'daemon failed, restarting',
        );
        await sleep(delay * 1000, signal);
      }
    }
  }
}

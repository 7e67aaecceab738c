import type { Logger } from 'pino';
import { isStatus, MERGE_PATCH, type KubeClient } from '../utils/kube-client.js';
import { KeyedMutex } from '../utils/keyed-mutex.js';
import { errorMessage } from '../utils/logger.js';
import { PermanentError, TemporaryError } from './errors.js';
import { handlerContext, type ContextDeps } from './handler-context.js';
import type { Informer } from './informer.js';
import type { FrameworkMetrics } from './metrics.js';
import { decideCause, failureMemory, type StateAnnotations } from './cause.js';
import { ObjectMemories, type ObjectMemory } from './object-memory.js';
import { ObjectTasks } from './object-tasks.js';
import { WorkQueue, type QueueOptions } from './queue.js';
import type { ClassMetadata, ControllerOptions, DeleteOptions } from './registry.js';
import { apiPath, type Cause, type HandlerResult, type KubeObject, type RequeueOptions } from './types.js';

export interface DispatcherDeps {
  client: KubeClient;
  informer: Informer;
  instance: object;
  metadata: ClassMetadata & { controller: ControllerOptions };
  contextDeps: Omit<ContextDeps, 'requeue'>;
  metrics: FrameworkMetrics;
  logger: Logger;
  annotations: StateAnnotations;
  queue: QueueOptions;
  isLeader: () => boolean;
  /** Aborted when the operator stops (after the grace period) or is killed. */
  signal: AbortSignal;
}

/** Our own resourceVersion-guarded write lost a race: the cache was behind. */
class StaleObject extends Error {}

type Method = (ctx: unknown) => Promise<HandlerResult | void> | HandlerResult | void;

/**
 * Runs one @controller class: a work queue of its objects' keys, each dispatched to the
 * handlers its current state calls for, plus the objects' timers and daemons. What it
 * remembers about each object lives in one record (ObjectMemories), forgotten with the object.
 */
export class Dispatcher {
  readonly queue: WorkQueue;
  private readonly memory = new ObjectMemories();
  private readonly lock = new KeyedMutex();
  private readonly tasks: ObjectTasks;
  private readonly options: ControllerOptions;
  private readonly contextDeps: ContextDeps;
  private workers?: Promise<void>;

  constructor(private readonly deps: DispatcherDeps) {
    this.options = deps.metadata.controller;
    this.queue = new WorkQueue(deps.queue);
    this.contextDeps = { ...deps.contextDeps, requeue: (key, options) => this.requeue(key, options) };
    const timers = deps.metadata.methods.flatMap((m) => (m.type === 'timer' ? [m] : []));
    const daemons = deps.metadata.methods.flatMap((m) => (m.type === 'daemon' ? [m] : []));
    this.tasks = new ObjectTasks(
      timers,
      daemons,
      // Timers and daemons act for the leader only, checked at each run (leadership is time-bounded).
      async (method, object, cause, signal) =>
        deps.isLeader() ? this.call(method, object, cause, signal) : undefined,
      (key) => deps.informer.get(key),
      this.lock,
      deps.signal,
      deps.logger,
      { handler: deps.instance, requeue: (key, seconds) => this.requeue(key, { after: seconds }) },
    );
    const needsFinalizer = deps.metadata.methods.some((m) => m.type === 'delete' && !m.options.optional);
    if (needsFinalizer && !this.options.finalizer) {
      throw new Error(
        `@controller(${this.options.kind}): a non-optional @onDelete handler needs the "finalizer" option`,
      );
    }
  }

  get kind(): string {
    return this.options.kind;
  }

  /** Objects this controller holds any state for: its memory, the queue's per-key state, running tasks. */
  get tracked(): number {
    return new Set([...this.memory.keys(), ...this.queue.trackedKeys(), ...this.tasks.keys()]).size;
  }

  /** A watch event for `key`: enqueue unless it only repeats a state that is waiting out a delay. */
  changed(key: string, obj: KubeObject): void {
    const m = this.memory.peek(key);
    // Seen while its handlers run: decided once they finish, when we know whether they wait.
    if (m?.active) {
      m.missed = obj;
      return;
    }
    if (m && waitsAt(m, obj)) return;
    if (m) m.waiting = undefined;
    this.enqueue(key);
  }

  private wait(m: ObjectMemory, key: string, obj: KubeObject, ms: number): void {
    m.waiting = { generation: obj.metadata.generation ?? 0, deleting: !!obj.metadata.deletionTimestamp };
    this.queue.addAfter(key, ms);
  }

  enqueue(key: string): void {
    this.queue.add(key);
    this.deps.metrics.queueDepth.set({ kind: this.kind }, this.queue.length);
  }

  /** Dispatches the update handlers of `key` even though its generation did not change. */
  trigger(key: string): void {
    this.memory.of(key).triggered = true;
    this.enqueue(key);
  }

  /** A handler's (or timer's) request to run the update handlers of `key` again, now, later or after its backoff. */
  requeue(key: string, options: RequeueOptions = {}): void {
    if (this.deps.signal.aborted) return;
    this.memory.of(key).triggered = true;
    if (options.backoff) this.queue.addRateLimited(key);
    else if (options.after) this.queue.addAfter(key, options.after * 1000);
    else this.enqueue(key);
  }

  start(): void {
    this.workers ??= this.queue.run(this.options.maxConcurrentReconciles ?? 3, (key) =>
      this.lock.run(key, () => this.process(key)),
    );
  }

  /** Called on gaining leadership: every cached object is looked at again. */
  resyncAll(): void {
    for (const obj of this.deps.informer.values())
      this.enqueue(`${obj.metadata.namespace ? `${obj.metadata.namespace}/` : ''}${obj.metadata.name}`);
  }

  /** Called on losing leadership: timers and daemons run on the leader only. */
  async stopTasks(): Promise<void> {
    await this.tasks.stopAll();
  }

  /** Stops taking work and waits for in-flight handlers (the caller bounds the wait). */
  async drain(): Promise<void> {
    this.queue.shutDown();
    await Promise.all([this.workers, this.tasks.stopAll()]);
  }

  private applies(filter: ((obj: KubeObject) => boolean) | undefined, obj: KubeObject): boolean {
    return filter === undefined || filter(obj);
  }

  private deleteHandlers(obj: KubeObject): Array<{ method: string; options: DeleteOptions }> {
    return this.deps.metadata.methods.flatMap((m) =>
      m.type === 'delete' && this.applies(m.options.when, obj) ? [m] : [],
    );
  }

  private async call(
    method: string,
    object: KubeObject,
    cause: Cause,
    signal: AbortSignal,
  ): Promise<HandlerResult | void> {
    const fn = (this.deps.instance as Record<string, Method>)[method];
    return await fn.call(this.deps.instance, handlerContext(this.contextDeps, object, cause, signal));
  }

  private async patch(obj: KubeObject, metadata: Record<string, unknown>): Promise<KubeObject> {
    if (this.deps.signal.aborted) throw new Error('operator stopped');
    const kind = this.deps.contextDeps.kind;
    try {
      return await this.deps.client.request<KubeObject>(
        'PATCH',
        apiPath(kind, obj.metadata.namespace, obj.metadata.name),
        {
          body: { metadata },
          contentType: MERGE_PATCH,
          signal: AbortSignal.any([this.deps.signal, AbortSignal.timeout(30_000)]),
        },
      );
    } catch (err) {
      if (isStatus(err, 409)) throw new StaleObject(`stale ${kind.kind} ${obj.metadata.name}`);
      throw err;
    }
  }

  private async process(key: string): Promise<void> {
    const m = this.memory.of(key, this.deps.informer.get(key)?.metadata.uid);
    m.active = true;
    try {
      await this.processOnce(key, m);
    } finally {
      m.active = false;
      const missed = m.missed;
      m.missed = undefined;
      if (missed && !waitsAt(m, missed)) {
        m.waiting = undefined;
        this.enqueue(key);
      }
      await this.forgetIfGone(key);
    }
  }

  /**
   * The object left the cache (deleted, or no longer selected): nothing about it is kept, and
   * its timers and daemons stop here too, since dropping its queued retry may have dropped
   * the only pass that would have stopped them.
   */
  private async forgetIfGone(key: string): Promise<void> {
    const m = this.memory.peek(key);
    if (this.deps.informer.get(key) === undefined && !m?.active && m?.missed === undefined) {
      this.memory.forget(key);
      this.queue.drop(key);
      await this.tasks.stop(key);
    } else this.memory.prune(key);
  }

  private async processOnce(key: string, m: ObjectMemory): Promise<void> {
    if (!this.deps.isLeader() || this.deps.signal.aborted) return;
    const obj = this.deps.informer.get(key);
    // An object the filter rejects is left alone, unless it still holds our finalizer while being
    // deleted (it matched earlier): releasing it must not depend on the filter.
    const holdsFinalizer =
      !!this.options.finalizer && !!obj?.metadata.finalizers?.includes(this.options.finalizer);
    if (
      !obj ||
      (!this.applies(this.options.when, obj) && !(obj.metadata.deletionTimestamp && holdsFinalizer))
    ) {
      m.triggered = false;
      await this.tasks.stop(key);
      return;
    }
    const started = performance.now();
    const triggered = m.triggered;
    m.triggered = false;
    m.waiting = undefined;
    let cause: Cause | undefined = obj.metadata.deletionTimestamp ? 'delete' : undefined;
    try {
      let result: HandlerResult | undefined;
      if (cause === 'delete') {
        await this.tasks.stop(key);
        result = await this.handleDelete(m, obj);
      } else {
        [cause, result] = await this.handleChange(key, m, obj, triggered);
      }
      if (cause === undefined) return;
      if (result?.requeueAfter !== undefined) {
        if (triggered) m.triggered = true;
        this.wait(m, key, obj, result.requeueAfter * 1000);
        this.deps.metrics.retries.inc({ kind: this.kind });
        this.deps.metrics.reconciles.inc({ kind: this.kind, cause, result: 'requeue' });
      } else {
        this.queue.forget(key);
        this.deps.metrics.reconciles.inc({ kind: this.kind, cause, result: 'success' });
      }
    } catch (err) {
      await this.handleError(key, m, obj, cause ?? 'update', triggered, err);
    } finally {
      if (cause)
        this.deps.metrics.duration.observe({ kind: this.kind, cause }, (performance.now() - started) / 1000);
      this.deps.metrics.queueDepth.set({ kind: this.kind }, this.queue.length);
    }
  }

  private async handleChange(
    key: string,
    m: ObjectMemory,
    original: KubeObject,
    triggered: boolean,
  ): Promise<[Cause | undefined, HandlerResult | undefined]> {
    let obj = original;
    const finalizer = this.options.finalizer;
    const wantsFinalizer = this.deleteHandlers(obj).some((h) => !h.options.optional);
    if (finalizer && wantsFinalizer && !obj.metadata.finalizers?.includes(finalizer)) {
      // Its own patch, before any handler: a delete can never outrun the cleanup.
      obj = await this.patch(obj, {
        finalizers: [...(obj.metadata.finalizers ?? []), finalizer],
        resourceVersion: obj.metadata.resourceVersion,
      });
    }
    await this.tasks.ensure(key, obj);
    // A person who removed the permanent-failure annotation asks for a retry.
    m.failed = failureMemory(obj, this.deps.annotations, m.failed);
    const cause = decideCause(obj, this.deps.annotations, {
      seen: m.seen,
      triggered,
      handledHere: m.handledGeneration,
      failedHere: m.failed?.generation,
    });
    if (cause === undefined) {
      m.seen = true;
      return [undefined, undefined];
    }
    const methods = this.deps.metadata.methods.flatMap((x) =>
      x.type === 'change' && x.cause === cause ? [x.method] : [],
    );
    const result = await this.runAll(methods, obj, cause);
    if (result.requeueAfter !== undefined) return [cause, result];
    const generation = String(obj.metadata.generation ?? 0);
    const marks = obj.metadata.annotations ?? {};
    if (
      marks[this.deps.annotations.handled] !== generation ||
      marks[this.deps.annotations.permanentFailure] !== undefined
    ) {
      try {
        await this.patch(obj, {
          annotations: {
            [this.deps.annotations.handled]: generation,
            [this.deps.annotations.permanentFailure]: null,
          },
        });
      } catch (err) {
        // Deleted while its handlers ran: nothing is left to mark, and its deletion is handled next.
        if (!isStatus(err, 404)) throw err;
      }
    }
    m.handledGeneration = Number(generation);
    m.failed = undefined;
    m.seen = true;
    return [cause, undefined];
  }

  /** Runs the handlers in declaration order; the soonest requested requeue wins. */
  private async runAll(methods: string[], obj: KubeObject, cause: Cause): Promise<HandlerResult> {
    let requeueAfter: number | undefined;
    for (const method of methods) {
      const r = await this.call(method, obj, cause, this.deps.signal);
      if (r?.requeueAfter !== undefined) requeueAfter = Math.min(requeueAfter ?? Infinity, r.requeueAfter);
    }
    return requeueAfter === undefined ? {} : { requeueAfter };
  }

  private async handleDelete(m: ObjectMemory, obj: KubeObject): Promise<HandlerResult | undefined> {
    const finalizer = this.options.finalizer;
    const holding = finalizer !== undefined && (obj.metadata.finalizers ?? []).includes(finalizer);
    // Without our finalizer, only optional handlers run, and once per process: the object may vanish any moment.
    if (!holding && m.deleteHandled) return undefined;
    // We released it already: a cache that has not caught up with that patch must not run
    // the delete handlers a second time.
    if (m.released) return undefined;
    // Handled here but not yet released (the release met a newer version, often the handlers'
    // own status write): only the release is retried, the handlers do not run again.
    if (!m.deleteHandled) {
      const handlers = this.deleteHandlers(obj).filter((h) => holding || h.options.optional);
      const result = await this.runAll(
        handlers.map((h) => h.method),
        obj,
        'delete',
      );
      if (result.requeueAfter !== undefined) return result;
      m.deleteHandled = true;
    }
    if (holding) {
      try {
        await this.patch(obj, {
          finalizers: (obj.metadata.finalizers ?? []).filter((f) => f !== finalizer),
          resourceVersion: obj.metadata.resourceVersion,
        });
      } catch (err) {
        if (!isStatus(err, 404)) throw err;
      }
      m.released = true;
    }
    return undefined;
  }

  private async handleError(
    key: string,
    m: ObjectMemory,
    obj: KubeObject,
    cause: Cause,
    triggered: boolean,
    err: unknown,
  ): Promise<void> {
    const log = this.deps.logger.child({ kind: this.kind, key, cause });
    if (this.deps.signal.aborted) return;
    if (err instanceof PermanentError) {
      this.deps.metrics.reconciles.inc({ kind: this.kind, cause, result: 'permanent_error' });
      this.queue.forget(key);
      log.error(
        { err: err.message },
        'handler failed permanently; not retrying until the generation changes',
      );
      const ctx = handlerContext(this.contextDeps, obj, cause, this.deps.signal);
      await ctx.events.warning('HandlerFailed', `${cause} handler failed permanently: ${err.message}`);
      if (cause === 'delete') return;
      m.seen = true;
      m.failed = { generation: obj.metadata.generation ?? 0, confirmed: false };
      try {
        await this.patch(obj, {
          annotations: { [this.deps.annotations.permanentFailure]: String(obj.metadata.generation ?? 0) },
        });
      } catch (patchErr) {
        log.warn({ err: errorMessage(patchErr) }, 'could not record the permanent failure');
      }
      return;
    }
    if (triggered) m.triggered = true;
    this.deps.metrics.retries.inc({ kind: this.kind });
    if (err instanceof TemporaryError) {
      this.deps.metrics.reconciles.inc({ kind: this.kind, cause, result: 'temporary_error' });
      log.info({ err: err.message, retryInSeconds: err.delaySeconds }, 'handler asked to retry');
      this.wait(m, key, obj, err.delaySeconds * 1000);
      return;
    }
    if (err instanceof StaleObject) {
      // Our finalizer patch raced a newer version of the object: not a failure, just look again.
      log.debug('conflict writing the object; retrying with a fresher copy');
      this.queue.addAfter(key, 200);
      return;
    }
    this.deps.metrics.reconciles.inc({ kind: this.kind, cause, result: 'error' });
    const delay = this.queue.addRateLimited(key);
    m.waiting = { generation: obj.metadata.generation ?? 0, deleting: !!obj.metadata.deletionTimestamp };
    log.error(
      { err: errorMessage(err), retryInMs: delay, retries: this.queue.retries(key) },
      'handler failed; backing off',
    );
  }
}

/** The object's state is the one its memory waits at: the event does not end the wait. */
function waitsAt(m: ObjectMemory, obj: KubeObject): boolean {
  const w = m.waiting;
  return (
    !!w && w.generation === (obj.metadata.generation ?? 0) && w.deleting === !!obj.metadata.deletionTimestamp
  );
}

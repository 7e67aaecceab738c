import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { DependencyContainer, InjectionToken } from 'tsyringe';
import { KubeClient } from '../utils/kube-client.js';
import { errorMessage } from '../utils/logger.js';
import { stoppable, withStopHelpers } from '../utils/sleep.js';
import { BackgroundRunner } from './background.js';
import { InformerCache } from './cache.js';
import { stateAnnotations } from './cause.js';
import { Dispatcher } from './dispatcher.js';
import { Informer } from './informer.js';
import { LeaderElector, type LeaderElectionOptions } from './leader-election.js';
import { FrameworkMetrics } from './metrics.js';
import { ProbeServer } from './probe-server.js';
import { DEFAULT_SHUTDOWN_GRACE_SECONDS, stopInOrder } from './shutdown.js';
import type { QueueOptions } from './queue.js';
import { handlerMetadata, type ClassMetadata, type WatchOptions } from './registry.js';
import { keyOf, kindId, viewId, type CacheReader, type KindRef, type OperatorContext } from './types.js';

export { DEFAULT_SHUTDOWN_GRACE_SECONDS, SHUTDOWN_BOUNDS, shutdownBudgetSeconds } from './shutdown.js';

// tsyringe resolves concrete classes; the operator only needs their constructors.
export type HandlerClass = new (...args: never[]) => unknown;

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  container: DependencyContainer;
  logger: Logger;
  registry: Registry;
  handlers: HandlerClass[];
  leaderElection?: LeaderElectionOptions | false;
  /** Serves /healthz, /readyz and /metrics when given (port 0 picks a free port). */
  probeAddress?: { host: string; port: number };
  shutdownGraceSeconds?: number;
  resyncSeconds?: number;
  watchdogSeconds?: number;
  /** Prefix of the framework's annotations, e.g. 'crawl.example.com' → crawl.example.com/last-handled-generation. */
  stateAnnotationPrefix: string;
  /** Retry tuning of every controller's queue (tests shorten the backoff). */
  queue?: QueueOptions;
  /** Longest wait between list/watch reconnection attempts while the API is unreachable (default 30). */
  watchRetryMaxSeconds?: number;
  /** Watch namespaced kinds in this namespace only (default: all namespaces). */
  namespace?: string;
  /** Source component named in posted Events (default 'operator'). */
  component?: string;
  /**
   * Kinds to list and watch into the cache even when no @controller or @watches names them:
   * what a process running only @background classes reads (a replica that only serves). A
   * KindRef with a labelSelector adds that view.
   */
  cacheKinds?: KindRef[];
}

/** The runtime: informers and caches everywhere, handlers on the leader only. */
export class Operator {
  private readonly client: KubeClient;
  private readonly informerCache = new InformerCache((err, kind) =>
    this.logger.error({ kind: kind.kind, err: errorMessage(err) }, 'cache change listener failed'),
  );
  private readonly dispatchers = new Map<string, Dispatcher>();
  private readonly background: BackgroundRunner;
  private readonly metrics: FrameworkMetrics;
  private readonly elector?: LeaderElector;
  private readonly probe: ProbeServer;
  private readonly shutdown = new AbortController();
  private readonly logger: Logger;
  private leading = false;
  private state: 'new' | 'started' | 'stopped' = 'new';
  /** Aborted the moment stop() is called (the shutdown signal only after the handlers' grace). */
  private readonly stopping = new AbortController();
  private stopped: Promise<void> = Promise.resolve();
  probePort?: number;

  constructor(private readonly opts: OperatorOptions) {
    if (!opts.stateAnnotationPrefix || /[\s/]$/.test(opts.stateAnnotationPrefix)) {
      throw new Error(
        `Operator: stateAnnotationPrefix must be a DNS-style prefix like "example.com", got "${opts.stateAnnotationPrefix}"`,
      );
    }
    this.logger = opts.logger;
    this.client = new KubeClient(opts.kubeConfig);
    this.metrics = new FrameworkMetrics(opts.registry);
    this.probe = new ProbeServer(opts.registry, () => this.ready());
    const backgroundClasses: Array<{ instance: object; metadata: ClassMetadata }> = [];
    for (const cls of opts.handlers) {
      const metadata = handlerMetadata(cls);
      if (!metadata.controller && !metadata.background) {
        throw new Error(
          `Operator: handler class ${cls.name} is decorated with neither @controller nor @background`,
        );
      }
      const instance = opts.container.resolve(cls as unknown as InjectionToken<object>);
      if (metadata.background) backgroundClasses.push({ instance, metadata });
      if (metadata.controller) this.addController(instance, { ...metadata, controller: metadata.controller });
    }
    for (const kind of opts.cacheKinds ?? []) this.informerFor(kind, kind.labelSelector);
    this.background = new BackgroundRunner(
      backgroundClasses,
      (signal) => this.operatorContext(signal),
      this.logger,
    );
    if (opts.leaderElection) {
      this.elector = new LeaderElector(
        this.client,
        opts.leaderElection,
        {
          onStartedLeading: () => this.setLeading(true),
          onStoppedLeading: () => this.setLeading(false),
          onError: (reason) => this.metrics.leaderElectionErrors.inc({ reason }),
        },
        this.logger.child({ component: 'leader-election' }),
      );
    }
  }

  get cache(): CacheReader {
    return this.informerCache;
  }

  isLeader(): boolean {
    return this.leading && (this.elector?.isLeader() ?? true);
  }

  /**
   * Whether this replica does a leader's work now: it leads and it has leader-only work (a
   * @controller, or a leader-only timer or daemon). A process that only serves never counts
   * as the leader, so "no replica leads" stays visible where only such processes run, and
   * figures that must come from one replica can follow this.
   */
  actsAsLeader(): boolean {
    return this.isLeader() && (this.dispatchers.size > 0 || this.background.hasLeaderOnlyWork);
  }

  /** The informer of one view (kind and selector): a kind watched with two selectors gets two. */
  private informerFor(ref: KindRef, labelSelector: string | undefined): Informer {
    const kind: KindRef = { ...ref, labelSelector };
    const id = viewId(kind);
    const existing = this.informerCache.all().find((i) => viewId(i.kind, i.selector) === id);
    if (existing) return existing;
    const informer = new Informer(
      this.client,
      kind,
      {
        labelSelector,
        namespace: kind.namespaced ? this.opts.namespace : undefined,
        watchdogSeconds: this.opts.watchdogSeconds ?? 300,
        resyncSeconds: this.opts.resyncSeconds ?? 600,
        maxRetryDelaySeconds: this.opts.watchRetryMaxSeconds,
      },
      {
        onChange: (key, obj) => this.informerCache.notify(kind, key, obj),
        onRestart: (reason) => this.metrics.watchRestarts.inc({ kind: kind.kind, reason }),
      },
      this.logger.child({ component: 'informer', kind: kind.kind }),
    );
    this.informerCache.register(informer);
    return informer;
  }

  private addController(
    instance: object,
    metadata: ClassMetadata & { controller: NonNullable<ClassMetadata['controller']> },
  ) {
    const kind = metadata.controller;
    const id = kindId(kind);
    if (this.dispatchers.has(id)) throw new Error(`Operator: two @controller classes for ${id}`);
    const informer = this.informerFor(kind, kind.labelSelector);
    const dispatcher = new Dispatcher({
      client: this.client,
      informer,
      instance,
      metadata,
      contextDeps: {
        client: this.client,
        kind,
        cache: this.informerCache,
        logger: this.logger,
        component: this.opts.component ?? 'operator',
        onStatusWrite: () => this.metrics.statusWrites.inc({ kind: kind.kind }),
      },
      metrics: this.metrics,
      logger: this.logger,
      annotations: stateAnnotations(this.opts.stateAnnotationPrefix),
      queue: this.opts.queue ?? {},
      isLeader: () => this.isLeader(),
      signal: this.shutdown.signal,
    });
    this.dispatchers.set(id, dispatcher);
    this.metrics.track(kind.kind, () => dispatcher.tracked);
    // Zero from the start, so rate() over status writes works before the first one.
    this.metrics.statusWrites.inc({ kind: kind.kind }, 0);
    this.informerCache.onRawChange(kind, (key, obj) => dispatcher.changed(key, obj));
    for (const w of metadata.watches) this.addWatch(w, dispatcher);
  }

  private addWatch(w: WatchOptions, dispatcher: Dispatcher): void {
    this.informerFor(w, w.labelSelector);
    this.informerCache.onRawChange(w, (_key, obj) => {
      try {
        for (const k of w.map(structuredClone(obj), this.informerCache))
          dispatcher.trigger(keyOf(k.namespace, k.name));
      } catch (err) {
        this.logger.error({ kind: w.kind, err: errorMessage(err) }, '@watches map() failed');
      }
    });
  }

  private operatorContext(signal: AbortSignal): OperatorContext {
    return withStopHelpers(signal, {
      logger: this.logger,
      cache: this.informerCache,
      trigger: (kind: KindRef, namespace: string | undefined, name: string) =>
        this.trigger(kind, namespace, name),
      isLeader: () => this.isLeader(),
    });
  }

  /** Enqueues an object of a @controller kind for its update handlers. */
  trigger(kind: KindRef, namespace: string | undefined, name: string): void {
    const d = this.dispatchers.get(kindId(kind));
    if (!d) throw new Error(`Operator.trigger: no @controller for ${kindId(kind)}`);
    d.trigger(keyOf(kind.namespaced ? namespace : undefined, name));
  }

  private ready(): boolean {
    return this.state === 'started' && this.informerCache.all().every((i) => i.hasSynced);
  }

  private setLeading(leading: boolean): void {
    // A replica that wins the lease while stopping does not start leader work it would abort at once.
    if (leading === this.leading || this.shutdown.signal.aborted || (leading && this.stopping.signal.aborted))
      return;
    this.leading = leading;
    this.metrics.leader.set(this.actsAsLeader() ? 1 : 0);
    if (leading) {
      this.background.startLeaderOnly(this.shutdown.signal);
      for (const d of this.dispatchers.values()) d.resyncAll();
    } else {
      void this.background.stopLeaderOnly();
      for (const d of this.dispatchers.values()) void d.stopTasks();
    }
  }

  /**
   * Starts informers, waits for their first list, runs startup hooks, then campaigns (or
   * leads). A stop() that lands meanwhile wins: start() returns without starting anything more.
   */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error('Operator.start: already started');
    if (this.opts.probeAddress) {
      const addr = await this.probe.listen(this.opts.probeAddress.host, this.opts.probeAddress.port);
      this.probePort = addr.port;
    }
    if (this.stopping.signal.aborted) return;
    for (const i of this.informerCache.all()) i.start();
    await Promise.race([
      Promise.all(this.informerCache.all().map((i) => i.synced)),
      stoppable(this.stopping.signal).stopped,
    ]);
    if (this.stopping.signal.aborted) return;
    try {
      await this.background.runHooks('startup', this.shutdown.signal);
    } catch (err) {
      await this.stop(); // a failed startup hook leaves nothing running behind
      throw err;
    }
    if (this.stopping.signal.aborted) return;
    this.state = 'started';
    for (const d of this.dispatchers.values()) d.start();
    this.background.startEveryReplica(this.shutdown.signal);
    if (this.elector) this.elector.start();
    else this.setLeading(true);
    this.logger.info({ controllers: [...this.dispatchers.values()].map((d) => d.kind) }, 'operator started');
  }

  /**
   * Graceful stop. Daemons and timers are aborted at once (a sweep or a hung cloud call never
   * holds the stop); in-flight handlers get the grace period, then their signal is aborted too;
   * cleanup hooks, informers and the lease release are each bounded. The worst case is
   * `shutdownBudgetSeconds(shutdownGraceSeconds)`, which a Pod's termination grace must exceed.
   */
  async stop(): Promise<void> {
    if (this.stopping.signal.aborted) return this.stopped;
    this.stopping.abort();
    this.state = 'stopped';
    this.stopped = this.stopInOrder();
    return this.stopped;
  }

  private stopInOrder(): Promise<void> {
    return stopInOrder(
      {
        drainAndStopDaemons: () => {
          const daemons = this.background.stopAll();
          const drained = Promise.all([...this.dispatchers.values()].map((d) => d.drain()));
          return Promise.all([drained, daemons]);
        },
        abortHandlers: () => this.shutdown.abort(),
        cleanup: (signal) => this.background.runHooks('cleanup', signal),
        stopInformers: () => Promise.all(this.informerCache.all().map((i) => i.stop())),
        releaseLease: (seconds) => this.elector?.stop(true, seconds),
        closeProbe: () => this.probe.close(),
      },
      this.opts.shutdownGraceSeconds ?? DEFAULT_SHUTDOWN_GRACE_SECONDS,
      this.logger,
    );
  }

  /**
   * Abrupt stop, as if the process died: nothing waits, the lease is kept, and every write a
   * still-running handler attempts through its context fails. For tests of crash recovery.
   */
  async kill(): Promise<void> {
    this.stopping.abort(); // a later stop() finds nothing left to do
    this.state = 'stopped';
    this.shutdown.abort();
    for (const d of this.dispatchers.values()) d.queue.shutDown();
    await Promise.all(this.informerCache.all().map((i) => i.stop()));
    await this.elector?.stop(false);
    await this.background.stopAll();
    await this.probe.close();
  }

  /** SIGTERM/SIGINT → graceful stop, then exit 0 (exit 1 if stopping failed). */
  installSignalHandlers(): void {
    const onSignal = (signal: NodeJS.Signals) => {
      this.logger.info({ signal }, 'shutting down');
      this.stop().then(
        () => process.exit(0),
        (err: unknown) => {
          this.logger.error({ err: errorMessage(err) }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }
}

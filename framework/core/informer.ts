import type { Logger } from 'pino';
import { KubeApiError, type KubeClient } from '../utils/kube-client.js';
import { errorMessage } from '../utils/logger.js';
import { sleep } from '../utils/sleep.js';
import { ExponentialBackoff } from '../utils/backoff.js';
import { apiPath, keyOf, type KindRef, type KubeObject } from './types.js';

export interface InformerOptions {
  labelSelector?: string;
  /** Watch one namespace only (namespaced kinds); all namespaces when absent. */
  namespace?: string;
  /** A watch with no event and no bookmark for this long is considered dead and reopened. */
  watchdogSeconds: number;
  /** Every object is re-announced this often, to heal anything a missed event left behind. */
  resyncSeconds: number;
  /** Longest delay between reconnection attempts after errors (default 30 s). */
  maxRetryDelaySeconds?: number;
}

export type RestartReason = 'gone' | 'error' | 'watchdog';

export interface InformerHooks {
  /** A change (or resync) of the object at `key`; `object` is the last state seen (also for deletes). */
  onChange(key: string, object: KubeObject): void;
  onRestart?(reason: RestartReason): void;
}

class Gone extends Error {}

/**
 * List+watch cache of one kind, written on the raw watch stream rather than client-node's
 * informer so that every failure path is ours: 410 relists, any other error relists after a
 * capped backoff, a silent stream is reopened by a watchdog (bookmarks keep a healthy but
 * idle stream talking), and the informer never stops on its own.
 */
export class Informer {
  private readonly store = new Map<string, KubeObject>();
  private readonly stopper = new AbortController();
  private resourceVersion?: string;
  private loop?: Promise<void>;
  private resync?: NodeJS.Timeout;
  private syncedOnce?: () => void;
  readonly synced: Promise<void>;
  hasSynced = false;

  constructor(
    private readonly client: KubeClient,
    readonly kind: KindRef,
    private readonly opts: InformerOptions,
    private readonly hooks: InformerHooks,
    private readonly logger: Logger,
  ) {
    this.synced = new Promise((resolve) => (this.syncedOnce = resolve));
  }

  get selector(): string | undefined {
    return this.opts.labelSelector;
  }

  get(key: string): KubeObject | undefined {
    return this.store.get(key);
  }

  values(): IterableIterator<KubeObject> {
    return this.store.values();
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run();
    this.resync = setInterval(() => {
      for (const [key, obj] of this.store) this.hooks.onChange(key, obj);
    }, this.opts.resyncSeconds * 1000);
  }

  async stop(): Promise<void> {
    this.stopper.abort();
    clearInterval(this.resync);
    await this.loop;
  }

  private async run(): Promise<void> {
    const backoff = new ExponentialBackoff<string>(500, (this.opts.maxRetryDelaySeconds ?? 30) * 1000);
    const signal = this.stopper.signal;
    while (!signal.aborted) {
      try {
        if (this.resourceVersion === undefined) await this.list(signal);
        backoff.forget('watch');
        await this.watch(signal);
      } catch (err) {
        if (signal.aborted) break;
        const reason: RestartReason = err instanceof Gone ? 'gone' : 'error';
        this.hooks.onRestart?.(reason);
        this.resourceVersion = undefined;
        if (reason === 'gone') {
          this.logger.info('watch expired (410), relisting');
        } else {
          const delay = backoff.next('watch');
          this.logger.warn({ err: errorMessage(err), retryInMs: delay }, 'list/watch failed, relisting');
          await sleep(delay, signal);
        }
      }
    }
  }

  private async list(signal: AbortSignal): Promise<void> {
    const seen = new Map<string, KubeObject>();
    let cont: string | undefined;
    let rv: string;
    do {
      const page = await this.client.request<{
        metadata: { resourceVersion: string; continue?: string };
        items: KubeObject[];
      }>('GET', apiPath(this.kind, this.opts.namespace), {
        query: { labelSelector: this.opts.labelSelector, limit: 500, continue: cont },
        signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
      });
      for (const item of page.items) {
        // List items carry no apiVersion/kind; handlers expect whole objects.
        const obj = withoutManagedFields({ ...item, apiVersion: this.apiVersion(), kind: this.kind.kind });
        seen.set(keyOf(obj.metadata.namespace, obj.metadata.name ?? ''), obj);
      }
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion;
    } while (cont);
    for (const [key, old] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.hooks.onChange(key, old);
      }
    }
    for (const [key, obj] of seen) {
      const old = this.store.get(key);
      this.store.set(key, obj);
      if (old?.metadata.resourceVersion !== obj.metadata.resourceVersion) this.hooks.onChange(key, obj);
    }
    this.resourceVersion = rv;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.syncedOnce?.();
    }
  }

  private apiVersion(): string {
    return this.kind.group ? `${this.kind.group}/${this.kind.version}` : this.kind.version;
  }

  private async watch(signal: AbortSignal): Promise<void> {
    const watchdog = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const pet = () => {
      clearTimeout(timer);
      timer = setTimeout(() => watchdog.abort(), this.opts.watchdogSeconds * 1000);
    };
    pet();
    try {
      await this.client.watch(
        apiPath(this.kind, this.opts.namespace),
        {
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          labelSelector: this.opts.labelSelector,
          // The server ends each watch after a while anyway; a randomised timeout spreads reconnects.
          timeoutSeconds: 240 + Math.floor(Math.random() * 120),
        },
        (event) => {
          pet();
          this.apply(event as { type: string; object: KubeObject & { code?: number; message?: string } });
        },
        AbortSignal.any([signal, watchdog.signal]),
      );
    } finally {
      clearTimeout(timer);
    }
    if (watchdog.signal.aborted && !signal.aborted) {
      this.logger.warn({ watchdogSeconds: this.opts.watchdogSeconds }, 'watch silent too long, reopening');
      this.hooks.onRestart?.('watchdog');
    }
  }

  private apply(event: { type: string; object: KubeObject & { code?: number; message?: string } }): void {
    const obj = event.object;
    if (event.type === 'ERROR') {
      if (obj.code === 410) throw new Gone(obj.message ?? 'resource version too old');
      throw new KubeApiError(`watch error: ${obj.message ?? JSON.stringify(obj)}`, obj.code ?? 500);
    }
    if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
    if (event.type === 'BOOKMARK') return;
    const key = keyOf(obj.metadata.namespace, obj.metadata.name ?? '');
    if (event.type === 'DELETED') this.store.delete(key);
    else if (event.type === 'ADDED' || event.type === 'MODIFIED')
      this.store.set(key, withoutManagedFields(obj));
    else return;
    this.hooks.onChange(key, obj);
  }
}

/**
 * Server-side-apply bookkeeping is never read by handlers, yet it is the largest part of a
 * stored object (a tree of empty objects per field, per manager): dropped on the way in,
 * as controller-runtime's TransformStripManagedFields does. Mutates: the object is ours,
 * freshly parsed from the API answer.
 */
function withoutManagedFields<T extends KubeObject>(obj: T): T {
  delete (obj.metadata as { managedFields?: unknown } | undefined)?.managedFields;
  return obj;
}

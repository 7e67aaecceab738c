import type { Logger } from 'pino';

/** Names a watched kind. `group` is '' for the core API group. */
export interface KindRef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  /**
   * The cache view of a kind watched with a label selector. A kind may be watched with several
   * (one informer each, since a selector cannot say "this label or that one"); a reader names
   * the view it reads. Without one, a reader gets the kind's only view.
   */
  labelSelector?: string;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  deletionTimestamp?: string;
  finalizers?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The part of every Kubernetes object the framework relies on. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface ObjectKey {
  namespace?: string;
  name: string;
}

export type Cause = 'create' | 'update' | 'resume' | 'delete' | 'timer' | 'daemon';

/** What a change, delete or timer handler may return: `requeueAfter` seconds to run again. */
export type HandlerResult = { requeueAfter?: number };

export interface RequeueOptions {
  /** Seconds to wait first (default 0). */
  after?: number;
  /** Wait out the object's exponential backoff instead, as after a failed handler. */
  backoff?: boolean;
}

/** Waiting that ends early when the handler is stopped (object deleted, leadership lost, shutdown). */
export interface Stoppable {
  /** Aborts when the handler should stop. */
  signal: AbortSignal;
  /** Resolves once `signal` aborts. */
  readonly stopped: Promise<void>;
  /** Waits `ms`, or less if stopped meanwhile; resolves true when the whole time passed. */
  sleep(ms: number): Promise<boolean>;
}

export interface CacheReader {
  /** A deep copy of the cached object, or undefined. */
  get<T extends KubeObject = KubeObject>(
    kind: KindRef,
    namespace: string | undefined,
    name: string,
  ): T | undefined;
  list<T extends KubeObject = KubeObject>(
    kind: KindRef,
    opts?: { namespace?: string; labelSelector?: string },
  ): T[];
  /**
   * Calls `listener` after every change of a cached object of `kind` (added, modified,
   * deleted, relisted, or re-announced by a resync) with its key and a deep copy of its
   * current state, undefined once it is gone. Lets a consumer keep its own view up to date
   * instead of re-listing. Returns the function that unsubscribes.
   */
  onChange<T extends KubeObject = KubeObject>(kind: KindRef, listener: CacheListener<T>): () => void;
}

export type CacheListener<T extends KubeObject = KubeObject> = (
  key: ObjectKey,
  object: T | undefined,
) => void;

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface StatusWriter {
  /** JSON merge patch of /status; skipped (returns false) when it would change nothing. */
  patch(partialStatus: Record<string, unknown>): Promise<boolean>;
  /** Returns `conditions` with `condition` upserted; lastTransitionTime kept unless status changes. */
  setCondition(
    conditions: Condition[] | undefined,
    condition: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>,
    observedGeneration?: number,
  ): Condition[];
}

export interface EventRecorder {
  normal(reason: string, message: string): Promise<void>;
  warning(reason: string, message: string): Promise<void>;
}

export interface MetadataPatch {
  annotations?: Record<string, string | null>;
  labels?: Record<string, string | null>;
}

export interface HandlerContext<T extends KubeObject = KubeObject> extends Stoppable {
  object: T;
  cause: Cause;
  logger: Logger;
  status: StatusWriter;
  events: EventRecorder;
  cache: CacheReader;
  patchMetadata(patch: MetadataPatch): Promise<T>;
  /**
   * Creates `child` in this object's namespace, owned by it (a controller ownerReference, so
   * the garbage collector deletes it with this object). Rejects with a KubeApiError (409 when
   * it exists already). Resolves with the object as created.
   */
  createOwned<C extends KubeObject>(kind: KindRef, child: C): Promise<C>;
  /**
   * Hands this object to its controller's work queue: its update handlers run again, as a
   * trigger makes them. For timers and daemons, whose results do not reach the queue.
   */
  requeue(options?: RequeueOptions): void;
}

export interface OperatorContext extends Stoppable {
  logger: Logger;
  cache: CacheReader;
  trigger(kind: KindRef, namespace: string | undefined, name: string): void;
  isLeader(): boolean;
}

export function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

export function parseKey(key: string): ObjectKey {
  const i = key.indexOf('/');
  return i < 0 ? { name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export function kindId(kind: KindRef): string {
  return `${kind.plural}.${kind.group || 'core'}/${kind.version}`;
}

/** The identity of one cache view: the kind and the label selector it is watched with. */
export function viewId(kind: KindRef, labelSelector: string | undefined = kind.labelSelector): string {
  return labelSelector ? `${kindId(kind)}?${labelSelector}` : kindId(kind);
}

export function apiPath(kind: KindRef, namespace?: string, name?: string, sub?: string): string {
  const base = kind.group ? `/apis/${kind.group}/${kind.version}` : `/api/${kind.version}`;
  const ns = kind.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const obj = name ? `/${encodeURIComponent(name)}` : '';
  return `${base}${ns}/${kind.plural}${obj}${name && sub ? `/${sub}` : ''}`;
}

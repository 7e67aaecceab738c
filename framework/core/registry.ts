import 'reflect-metadata';
import { injectable } from 'tsyringe';
import type { KindRef, KubeObject, ObjectKey, CacheReader } from './types.js';

/**
 * Decorator metadata. Decorators only record what a class declares (on the class itself,
 * via reflect-metadata); the Operator reads it back with handlerMetadata().
 */
// Method-style (bivariant) signatures, so handlers may declare the concrete type they watch,
// e.g. `when: (p: Proxy) => ...`, while the framework only knows KubeObject.
type Bivariant<A, R> = { fn(obj: A): R }['fn'];
type Bivariant2<A, B, R> = { fn(obj: A, handler: B): R }['fn'];
export type Filter = Bivariant<KubeObject, boolean>;

export interface ControllerOptions extends KindRef {
  /** Finalizer added when a non-optional delete handler applies to an object. */
  finalizer?: string;
  maxConcurrentReconciles?: number;
  labelSelector?: string;
  when?: Filter;
}

export interface WatchOptions extends KindRef {
  labelSelector?: string;
  map: { fn(obj: KubeObject, cache: CacheReader): ObjectKey[] }['fn'];
}

export interface DeleteOptions {
  when?: Filter;
  /** An optional handler needs no finalizer: it runs only if the deletion is seen in time. */
  optional?: boolean;
}

export interface TimerOptions {
  /**
   * Seconds. For resource timers it may be computed, at each run, from the object and the
   * handler instance (e.g. `(_obj, self: MyHandler) => self.settings.checkSeconds`).
   */
  interval: number | Bivariant2<KubeObject, object, number>;
  /** Fraction 0..1 of the interval added or removed at random. */
  jitter?: number;
  initialDelay?: number;
  /** Operator-wide timers only: run on the leader alone (default true). */
  leaderOnly?: boolean;
}

export interface DaemonOptions {
  /** Seconds before restarting a daemon that threw a non-temporary error (default 60). */
  backoff?: number;
  /** Operator-wide daemons only: run on every replica, not just the leader (default false). */
  everyReplica?: boolean;
}

export type ChangeCause = 'create' | 'update' | 'resume';

export type MethodEntry =
  | { type: 'change'; cause: ChangeCause; method: string }
  | { type: 'delete'; method: string; options: DeleteOptions }
  | { type: 'timer'; method: string; options: TimerOptions }
  | { type: 'daemon'; method: string; options: DaemonOptions }
  | { type: 'startup' | 'cleanup'; method: string };

export interface ClassMetadata {
  controller?: ControllerOptions;
  background?: boolean;
  watches: WatchOptions[];
  methods: MethodEntry[];
}

const KEY = Symbol('operator-framework:handlers');

// A method decorator sees the prototype; a class decorator sees the constructor.
type Ctor = abstract new (...args: never[]) => unknown;

function own(target: Ctor): ClassMetadata {
  let meta = Reflect.getOwnMetadata(KEY, target) as ClassMetadata | undefined;
  if (!meta) {
    meta = { watches: [], methods: [] };
    Reflect.defineMetadata(KEY, meta, target);
  }
  return meta;
}

/** The metadata declared on a handler class (empty when it has none). */
export function handlerMetadata(target: Ctor): ClassMetadata {
  return (Reflect.getOwnMetadata(KEY, target) as ClassMetadata | undefined) ?? { watches: [], methods: [] };
}

function checkKind(kind: Partial<KindRef>, what: string): void {
  for (const f of ['version', 'plural', 'kind'] as const) {
    if (typeof kind[f] !== 'string' || kind[f] === '')
      throw new Error(`${what}: "${f}" must be a non-empty string`);
  }
  if (typeof kind.group !== 'string')
    throw new Error(`${what}: "group" must be a string ('' for the core group)`);
  if (typeof kind.namespaced !== 'boolean') throw new Error(`${what}: "namespaced" must be true or false`);
}

function methodDecorator(entry: (method: string) => MethodEntry): MethodDecorator {
  return (target, propertyKey) => {
    const meta = own((target as { constructor: Ctor }).constructor);
    meta.methods.push(entry(String(propertyKey)));
  };
}

/** Marks a class as the controller of one kind. Implies tsyringe's @injectable(). */
export function controller(options: ControllerOptions): ClassDecorator {
  checkKind(options, '@controller');
  const mcr = options.maxConcurrentReconciles ?? 3;
  if (!Number.isInteger(mcr) || mcr < 1) {
    throw new Error(
      `@controller(${options.kind}): maxConcurrentReconciles must be an integer >= 1, got ${mcr}`,
    );
  }
  return (target) => {
    own(target as unknown as Ctor).controller = { ...options, maxConcurrentReconciles: mcr };
    injectable()(target as unknown as new (...args: unknown[]) => unknown);
  };
}

export function watches(options: WatchOptions): ClassDecorator {
  checkKind(options, '@watches');
  if (typeof options.map !== 'function')
    throw new Error(`@watches(${options.kind}): "map" must be a function`);
  return (target) => {
    own(target as unknown as Ctor).watches.push(options);
  };
}

/** Marks a class of operator-wide hooks, timers and daemons. Implies tsyringe's @injectable(). */
export function background(): ClassDecorator {
  return (target) => {
    own(target as unknown as Ctor).background = true;
    injectable()(target as unknown as new (...args: unknown[]) => unknown);
  };
}

export const onCreate = (): MethodDecorator =>
  methodDecorator((method) => ({ type: 'change', cause: 'create', method }));
export const onUpdate = (): MethodDecorator =>
  methodDecorator((method) => ({ type: 'change', cause: 'update', method }));
export const onResume = (): MethodDecorator =>
  methodDecorator((method) => ({ type: 'change', cause: 'resume', method }));
export const onDelete = (options: DeleteOptions = {}): MethodDecorator =>
  methodDecorator((method) => ({ type: 'delete', method, options }));
export const onStartup = (): MethodDecorator => methodDecorator((method) => ({ type: 'startup', method }));
export const onCleanup = (): MethodDecorator => methodDecorator((method) => ({ type: 'cleanup', method }));

export function timer(options: TimerOptions): MethodDecorator {
  if (typeof options.interval === 'number' && !(options.interval > 0)) {
    throw new Error(`@timer: interval must be > 0 seconds, got ${options.interval}`);
  }
  if (typeof options.interval !== 'number' && typeof options.interval !== 'function') {
    throw new Error('@timer: interval must be a number of seconds or a function of the object');
  }
  if (options.jitter !== undefined && !(options.jitter >= 0 && options.jitter <= 1)) {
    throw new Error(`@timer: jitter must be a fraction between 0 and 1, got ${options.jitter}`);
  }
  if (options.initialDelay !== undefined && !(options.initialDelay >= 0)) {
    throw new Error(`@timer: initialDelay must be >= 0 seconds, got ${options.initialDelay}`);
  }
  return methodDecorator((method) => ({ type: 'timer', method, options }));
}

export function daemon(options: DaemonOptions = {}): MethodDecorator {
  if (options.backoff !== undefined && !(options.backoff > 0)) {
    throw new Error(`@daemon: backoff must be > 0 seconds, got ${options.backoff}`);
  }
  return methodDecorator((method) => ({ type: 'daemon', method, options }));
}

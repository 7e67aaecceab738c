// The framework's public surface: what a handler author uses (decorators and their options,
// the contexts and what they carry, the errors, the Operator). The modules under core/ and
// utils/ are implementation details (their own tests import them directly); test helpers
// are in framework/testing/index.ts (the control plane in framework/control-plane/). docs/framework.md is the guide.
//
// @controller and @background already apply tsyringe's @injectable() to the class: handler
// classes do not repeat it (their constructor arguments still need @inject(TOKEN) when
// typed by an interface).
import 'reflect-metadata';

export {
  controller,
  watches,
  background,
  onCreate,
  onUpdate,
  onResume,
  onDelete,
  onStartup,
  onCleanup,
  timer,
  daemon,
  type ControllerOptions,
  type WatchOptions,
  type DeleteOptions,
  type TimerOptions,
  type DaemonOptions,
} from './core/registry.js';
export { TemporaryError, PermanentError } from './core/errors.js';
export { Operator, type OperatorOptions, type HandlerClass } from './core/operator.js';
export type { LeaderElectionOptions } from './core/leader-election.js';
export type { QueueOptions } from './core/queue.js';
export { KubeApiError, isStatus } from './utils/kube-client.js';
export type {
  KindRef,
  KubeObject,
  ObjectMeta,
  ObjectKey,
  Cause,
  HandlerResult,
  HandlerContext,
  RequeueOptions,
  Stoppable,
  OperatorContext,
  CacheReader,
  CacheListener,
  StatusWriter,
  EventRecorder,
  Condition,
  MetadataPatch,
} from './core/types.js';

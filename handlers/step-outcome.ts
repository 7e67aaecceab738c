// What a state-machine step means once its status is written: which of its Events and logs
// go out, and what the handler answers the framework. Pure; the controller's shell acts on it.
import { PermanentError, type HandlerResult } from '../framework/index.js';
import type { EventIntent, LogIntent, Next, Step } from './proxy-state-machine.js';

/**
 * The step's Events and logs to emit, given whether its status write changed anything (a step
 * without a status counts as changed). A retry that changes nothing repeats no Event and no
 * info log; errors are logged every time.
 */
export function stepOutputs(
  step: Pick<Step, 'events' | 'logs'>,
  changed: boolean,
): { events: EventIntent[]; logs: LogIntent[] } {
  return {
    events: changed ? step.events : [],
    logs: step.logs.filter((l) => changed || l.level === 'error'),
  };
}

/**
 * The handler's answer for the step's `next`: nothing, a requeue, or a throw. A backoff
 * rethrows `cause` (the framework's per-object exponential backoff); permanent stops retrying.
 */
export function handlerOutcome(next: Next, cause?: unknown): HandlerResult | void {
  switch (next.kind) {
    case 'steady':
      return;
    case 'requeue':
      return { requeueAfter: next.seconds };
    case 'backoff':
      throw cause instanceof Error ? cause : new Error(String(cause ?? 'retrying'));
    case 'permanent':
      throw new PermanentError(next.message);
  }
}

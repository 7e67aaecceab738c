import { PermanentError } from '../../framework/index.js';
import type { EventIntent, LogIntent, Next } from '../../handlers/proxy-state-machine.js';
import { handlerOutcome, stepOutputs } from '../../handlers/step-outcome.js';

const EVENT: EventIntent = { type: 'Normal', reason: 'Ready', message: 'proxy is serving' };
const INFO: LogIntent = { level: 'info', message: 'ready' };
const WARN: LogIntent = { level: 'warn', message: 'slow' };
const ERROR: LogIntent = { level: 'error', message: 'provider refused' };

describe('stepOutputs: a retry that changes nothing repeats no Event and no info log', () => {
  it.each<[string, boolean, { events: EventIntent[]; logs: LogIntent[] }]>([
    [
      'the write changed the status: every Event and log',
      true,
      { events: [EVENT], logs: [INFO, WARN, ERROR] },
    ],
    ['nothing changed: only the error logs, every time', false, { events: [], logs: [ERROR] }],
  ])('%s', (_what, changed, want) => {
    expect(stepOutputs({ events: [EVENT], logs: [INFO, WARN, ERROR] }, changed)).toEqual(want);
  });
});

describe("handlerOutcome: the step's next, as the framework hears it", () => {
  it.each<[string, Next, ReturnType<typeof handlerOutcome>]>([
    ['steady: nothing', { kind: 'steady' }, undefined],
    ['requeue: after its seconds', { kind: 'requeue', seconds: 5 }, { requeueAfter: 5 }],
  ])('%s', (_what, next, want) => {
    expect(handlerOutcome(next)).toEqual(want);
  });

  const cause = new Error('quota exceeded');
  it.each<[string, Next, unknown, (err: unknown) => void]>([
    ['backoff rethrows the cause itself', { kind: 'backoff' }, cause, (err) => expect(err).toBe(cause)],
    [
      'backoff with a cause that is no Error wraps its text',
      { kind: 'backoff' },
      'socket hang up',
      (err) => expect(err).toEqual(new Error('socket hang up')),
    ],
    [
      'backoff without a cause still goes to the backoff',
      { kind: 'backoff' },
      undefined,
      (err) => expect(err).toEqual(new Error('retrying')),
    ],
    [
      'permanent stops retrying with its message',
      { kind: 'permanent', message: 'spec.provider names no configured provider' },
      cause,
      (err) => {
        expect(err).toBeInstanceOf(PermanentError);
        expect((err as Error).message).toBe('spec.provider names no configured provider');
      },
    ],
  ])('%s', (_what, next, why, check) => {
    let thrown: unknown;
    try {
      handlerOutcome(next, why);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeDefined();
    check(thrown);
  });
});

import {
  holdOf,
  isForgettable,
  onObservation,
  onRecordChanged,
  onUnreachable,
  suspicionToken,
  type HoldState,
  type SuspicionPolicy,
  type UnreachableVerdict,
} from '../../book/proxy-holds.js';
import type { HealthObservation, HoldReason } from '../../book/lease-store.js';

const POLICY: SuspicionPolicy = { timeoutMillis: 60_000, holdoffMillis: 5_000 };
const A = '10.0.0.1:3128';
const B = '10.0.0.2:3128';

describe('an unreachable report', () => {
  it.each<[string, HoldState | undefined, number, UnreachableVerdict, HoldReason | undefined]>([
    // [case, state before, report at, verdict, hold after]
    ['on a proxy the book knows nothing of raises a suspicion', undefined, 1000, 'raised', 'suspect'],
    [
      'on a suspect proxy starts nothing more',
      { address: A, suspectSince: 500 },
      1000,
      'already_suspect',
      'suspect',
    ],
    [
      'moments after a passing re-probe is not believed (the abuse guard)',
      { address: A, clearedAt: 0 },
      4_999,
      'not_believed',
      undefined,
    ],
    [
      'once the holdoff is over raises a suspicion again',
      { address: A, clearedAt: 0 },
      5_000,
      'raised',
      'suspect',
    ],
    [
      'after an unanswered suspicion timed out raises a new one',
      { address: A, suspectSince: 0 },
      60_000,
      'raised',
      'suspect',
    ],
    [
      'about a new address ignores what the old one did',
      { address: B, clearedAt: 900 },
      1000,
      'raised',
      'suspect',
    ],
    ['on a proxy held down keeps it down', { address: A, down: true }, 1000, 'raised', 'down'],
  ])('%s', (_case, before, at, verdict, hold) => {
    const result = onUnreachable(before, A, at, POLICY);
    expect(result.verdict).toBe(verdict);
    expect(holdOf(result.state, A, at, POLICY)).toBe(hold);
  });
});

describe("the health engine's news", () => {
  const suspect: HoldState = { address: A, suspectSince: 1000 };
  it.each<[string, HoldState | undefined, HealthObservation, HoldReason | undefined]>([
    // [case, state before, observation, hold after (at 2,000)]
    ['a recheck asked for this suspicion passed: it ends', suspect, pass(A, '1000'), undefined],
    ['a recheck asked for an earlier suspicion answers nothing', suspect, pass(A, '999'), 'suspect'],
    ['a passing recheck of another address answers nothing', suspect, pass(B, '1000'), 'suspect'],
    ['an unhealthy verdict holds the proxy down', suspect, { kind: 'down', address: A }, 'down'],
    [
      'an unhealthy verdict holds even a proxy the book knew nothing of',
      undefined,
      { kind: 'down', address: A },
      'down',
    ],
    [
      'a healthy verdict lifts the down hold',
      { address: A, down: true },
      { kind: 'up', address: A },
      undefined,
    ],
    ['a healthy verdict leaves a suspicion to its own probe', suspect, { kind: 'up', address: A }, 'suspect'],
    [
      'a single passing probe does not lift a down hold',
      { address: A, down: true, suspectSince: 1000 },
      pass(A, '1000'),
      'down',
    ],
  ])('%s', (_case, before, observation, hold) => {
    expect(holdOf(onObservation(before, observation, 2000), A, 2000, POLICY)).toBe(hold);
  });

  it('a passing re-probe starts the holdoff', () => {
    const after = onObservation({ address: A, suspectSince: 1000 }, pass(A, suspicionToken(1000)), 1500);
    expect(after).toEqual({ address: A, clearedAt: 1500 });
    expect(onUnreachable(after, A, 6_499, POLICY).verdict).toBe('not_believed');
  });
});

describe('the status catching up', () => {
  it.each<[string, HoldState, { address: string; healthy: boolean; was?: boolean }, HoldState | undefined]>([
    [
      'an unhealthy status keeps the down hold (a replica whose cache lags still sees it healthy)',
      { address: A, down: true },
      { address: A, healthy: false, was: true },
      { address: A, down: true },
    ],
    [
      'a status healthy again (a later verdict) ends the down hold',
      { address: A, down: true },
      { address: A, healthy: true, was: false },
      undefined,
    ],
    [
      'a still-healthy status leaves the down hold',
      { address: A, down: true },
      { address: A, healthy: true, was: true },
      { address: A, down: true },
    ],
    [
      'a record first seen healthy leaves it (no turn seen)',
      { address: A, down: true },
      { address: A, healthy: true },
      { address: A, down: true },
    ],
    [
      'a new address forgets everything',
      { address: A, suspectSince: 5, down: true },
      { address: B, healthy: true },
      undefined,
    ],
    [
      'a suspicion outlives a status write',
      { address: A, suspectSince: 5 },
      { address: A, healthy: false },
      { address: A, suspectSince: 5 },
    ],
  ])('%s', (_case, before, { was, ...record }, after) => {
    expect(onRecordChanged(before, record, was)).toEqual(after);
  });
});

describe('forgetting', () => {
  it.each<[string, HoldState, number, boolean]>([
    ['a running suspicion is kept', { address: A, suspectSince: 0 }, 59_999, false],
    ['a down hold is kept', { address: A, down: true }, 10 ** 9, false],
    ['a holdoff is kept while it runs', { address: A, clearedAt: 0 }, 4_999, false],
    ['an ended holdoff is forgotten', { address: A, clearedAt: 0 }, 5_000, true],
  ])('%s', (_case, state, now, forgettable) => {
    expect(isForgettable(state, now, POLICY)).toBe(forgettable);
  });
});

function pass(address: string, suspicion: string): HealthObservation {
  return { kind: 'probe_passed', address, suspicion };
}

// The rule of a remembered refusal (refusal-memo.ts), as a table: answered again only at the
// version it was walked at, before its bound (a second after the walk's answer, and the first
// matching cooldown's end); a walk in flight shared only by refusals at its version.
import { describe, expect, it } from '@jest/globals';
import {
  mayShareWalk,
  REFUSAL_MEMO_MILLIS,
  refusalAt,
  refusalKey,
  rememberRefusal,
  stillRefused,
  type RememberedRefusal,
} from '../../book/refusal-memo.js';

const T0 = 1_000_000;

describe('rememberRefusal', () => {
  it.each<[string, Parameters<typeof rememberRefusal>, RememberedRefusal | undefined]>([
    [
      'no_match is not remembered (its walk costs nothing)',
      [{ granted: false, reason: 'no_match' }, 'v1', T0],
      undefined,
    ],
    [
      'all_busy: for a second',
      [{ granted: false, reason: 'all_busy' }, 'v1', T0],
      { reason: 'all_busy', version: 'v1', until: T0 + REFUSAL_MEMO_MILLIS },
    ],
    [
      'all_busy beside a cooldown ending sooner: until it ends',
      [{ granted: false, reason: 'all_busy' }, 'v1', T0, T0 + 300],
      { reason: 'all_busy', firstEnd: T0 + 300, version: 'v1', until: T0 + 300 },
    ],
    [
      'all_cooling_down: until the first cooldown ends, at most a second',
      [{ granted: false, reason: 'all_cooling_down', retryAfterMs: 60_000 }, 'v1', T0],
      { reason: 'all_cooling_down', firstEnd: T0 + 60_000, version: 'v1', until: T0 + REFUSAL_MEMO_MILLIS },
    ],
    [
      'a walk that took 3 s: the bound counts from its answer (else forgotten as it is made)',
      [{ granted: false, reason: 'all_busy' }, 'v1', T0, undefined, T0 + 3000],
      { reason: 'all_busy', version: 'v1', until: T0 + 3000 + REFUSAL_MEMO_MILLIS },
    ],
    [
      "a walk that took 3 s: a cooldown's end counts from its start, the earliest it can be",
      [{ granted: false, reason: 'all_cooling_down', retryAfterMs: 3500 }, 'v1', T0, undefined, T0 + 3000],
      { reason: 'all_cooling_down', firstEnd: T0 + 3500, version: 'v1', until: T0 + 3500 },
    ],
    [
      'all_busy beside a cooldown that ended during the walk: never answered again',
      [{ granted: false, reason: 'all_busy' }, 'v1', T0, T0 + 100, T0 + 3000],
      { reason: 'all_busy', firstEnd: T0 + 100, version: 'v1', until: T0 + 100 },
    ],
    [
      'an answer time before the start (clocks apart): the bound counts from the start',
      [{ granted: false, reason: 'all_busy' }, 'v1', T0, undefined, T0 - 500],
      { reason: 'all_busy', version: 'v1', until: T0 + REFUSAL_MEMO_MILLIS },
    ],
    [
      'no version read before the walk: kept without one',
      [{ granted: false, reason: 'all_busy' }, undefined, T0],
      { reason: 'all_busy', until: T0 + REFUSAL_MEMO_MILLIS },
    ],
  ])('%s', (_name, args, expected) => {
    expect(rememberRefusal(...args)).toEqual(expected);
  });
});

describe('stillRefused', () => {
  const memo: RememberedRefusal = { reason: 'all_busy', version: 'v1', until: T0 + 1000 };
  it.each<[string, RememberedRefusal, string, number, boolean]>([
    ['same version, before the bound', memo, 'v1', T0 + 999, true],
    ['same version, at the bound', memo, 'v1', T0 + 1000, false],
    ['another version (a slot freed, a hold lifted, the catalog changed)', memo, 'v2', T0, false],
    ['no version known', { reason: 'all_busy', until: T0 + 1000 }, 'v1', T0, false],
  ])('%s → %s', (_name, m, version, now, expected) => {
    expect(stillRefused(m, version, now)).toBe(expected);
  });
});

describe('mayShareWalk', () => {
  it.each<[string, boolean, string | undefined, string | undefined, boolean]>([
    ['predicted refused, the version the walk read → shares it', true, 'v1', 'v1', true],
    ['predicted refused, a slot freed since the walk started → walks', true, 'v1', 'v2', false],
    ['not predicted refused (likely a grant of its own) → walks', false, 'v1', 'v1', false],
    ['the walk read no version (a first refusal) → walks', true, undefined, 'v1', false],
    ['this request read no version → walks', true, 'v1', undefined, false],
  ])('%s', (_name, predicted, walkVersion, version, expected) => {
    expect(mayShareWalk(predicted, walkVersion, version)).toBe(expected);
  });
});

describe('refusalAt', () => {
  it("counts an all_cooling_down's Retry-After down from the first cooldown's end, never below 0", () => {
    const memo: RememberedRefusal = {
      reason: 'all_cooling_down',
      firstEnd: T0 + 5000,
      version: 'v',
      until: T0 + 1000,
    };
    expect(refusalAt(memo, T0 + 200)).toEqual({
      granted: false,
      reason: 'all_cooling_down',
      retryAfterMs: 4800,
    });
    expect(refusalAt(memo, T0 + 9000)).toEqual({
      granted: false,
      reason: 'all_cooling_down',
      retryAfterMs: 0,
    });
    expect(refusalAt({ reason: 'all_busy', until: T0 }, T0)).toEqual({ granted: false, reason: 'all_busy' });
  });
});

describe('refusalKey', () => {
  const base = { selector: { geo: 'eu' }, ttlSeconds: 60, target: 'shop.example', owner: 'team-a' };
  it('one shape per owner, target, exit IP and selector; the TTL is not part of it; a session is never remembered', () => {
    expect(refusalKey(base)).toBe(refusalKey({ ...base, ttlSeconds: 600 }));
    expect(refusalKey(base)).not.toBe(refusalKey({ ...base, owner: 'team-b' }));
    expect(refusalKey(base)).not.toBe(refusalKey({ ...base, target: 'other.example' }));
    expect(refusalKey(base)).not.toBe(refusalKey({ ...base, selector: { geo: 'us' } }));
    expect(refusalKey({ ...base, session: 's1' })).toBeUndefined();
  });
});

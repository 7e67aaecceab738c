import { setCondition } from '../../framework/core/status-writer.js';
import { applyMergePatch, mergePatchIsNoop } from '../../framework/utils/merge-patch.js';
import type { Condition } from '../../framework/index.js';

const T0 = '2026-01-01T00:00:00Z';
const now = () => new Date('2026-02-02T02:02:02.123Z');
const ready = (
  status: Condition['status'],
  reason = 'R',
): Omit<Condition, 'lastTransitionTime' | 'observedGeneration'> => ({
  type: 'Ready',
  status,
  reason,
  message: 'm',
});

describe('setCondition', () => {
  const existing: Condition[] = [{ ...ready('True'), lastTransitionTime: T0 }];

  it.each([
    ['adds a new condition stamped now', [], ready('True'), '2026-02-02T02:02:02Z'],
    ['keeps lastTransitionTime when only reason/message change', existing, ready('True', 'Other'), T0],
    ['moves lastTransitionTime when the status changes', existing, ready('False'), '2026-02-02T02:02:02Z'],
  ])('%s', (_case, conditions, condition, transition) => {
    const [c] = setCondition(conditions, condition, 7, now);
    expect(c).toEqual({ ...condition, lastTransitionTime: transition, observedGeneration: 7 });
  });

  it('leaves other conditions and the input array alone', () => {
    const other: Condition = {
      type: 'Healthy',
      status: 'True',
      reason: 'x',
      message: '',
      lastTransitionTime: T0,
    };
    const input = [other, ...existing];
    const out = setCondition(input, ready('False'), undefined, now);
    expect(out[0]).toBe(other);
    expect(out).toHaveLength(2);
    expect(input[1].status).toBe('True');
  });
});

describe('JSON merge patch', () => {
  it.each([
    [{ a: 1 }, { a: 1 }, true],
    [{ a: 1 }, { a: 2 }, false],
    [{ a: { b: 1, c: 2 } }, { a: { b: 1 } }, true],
    [{ a: 1 }, { b: null }, true],
    [{ a: 1 }, { a: null }, false],
    [undefined, {}, true],
    [undefined, { phase: 'Ready' }, false],
    [{ list: [1, 2] }, { list: [1, 2] }, true],
    [{ list: [1, 2] }, { list: [2] }, false],
  ])('patching %j with %j is a no-op: %p', (target, patch, noop) => {
    expect(mergePatchIsNoop(target, patch)).toBe(noop);
  });

  it('merges objects, replaces arrays and deletes nulls', () => {
    expect(applyMergePatch({ a: { b: 1, c: 2 }, l: [1], d: 1 }, { a: { c: 3 }, l: [2], d: null })).toEqual({
      a: { b: 1, c: 3 },
      l: [2],
    });
  });
});

import { decideCause, failureMemory, stateAnnotations } from '../../framework/core/cause.js';
import type { KubeObject } from '../../framework/index.js';

const marks = stateAnnotations('test.example.com');

function obj(generation: number, annotations: Record<string, string> = {}): KubeObject {
  return { metadata: { name: 'w', namespace: 'ns', uid: 'u', generation, annotations } };
}

describe('decideCause: the cause comes from the object, never from in-memory history', () => {
  it.each([
    ['no marker', obj(1), { seen: false, triggered: false }, 'create'],
    [
      'no marker, seen before (a failed create is retried)',
      obj(1),
      { seen: true, triggered: false },
      'create',
    ],
    [
      'marker behind generation',
      obj(3, { [marks.handled]: '2' }),
      { seen: true, triggered: false },
      'update',
    ],
    [
      'marker behind generation, first sight',
      obj(3, { [marks.handled]: '2' }),
      { seen: false, triggered: false },
      'update',
    ],
    [
      'marker current, first sight in this process',
      obj(3, { [marks.handled]: '3' }),
      { seen: false, triggered: false },
      'resume',
    ],
    [
      'marker current, already seen (e.g. own status write)',
      obj(3, { [marks.handled]: '3' }),
      { seen: true, triggered: false },
      undefined,
    ],
    [
      'marker current, triggered by a watched object',
      obj(3, { [marks.handled]: '3' }),
      { seen: true, triggered: true },
      'update',
    ],
    [
      'marker current, triggered, first sight (resume covers it)',
      obj(3, { [marks.handled]: '3' }),
      { seen: false, triggered: true },
      'resume',
    ],
    [
      'permanent failure at this generation',
      obj(3, { [marks.handled]: '2', [marks.permanentFailure]: '3' }),
      { seen: false, triggered: true },
      undefined,
    ],
    [
      'permanent failure at an older generation',
      obj(4, { [marks.handled]: '2', [marks.permanentFailure]: '3' }),
      { seen: true, triggered: false },
      'update',
    ],
    [
      'permanent failure of a create',
      obj(1, { [marks.permanentFailure]: '1' }),
      { seen: false, triggered: false },
      undefined,
    ],
    [
      'no marker in a stale cache, but handled here',
      obj(1),
      { seen: true, triggered: false, handledHere: 1 },
      undefined,
    ],
    [
      'stale marker, newer generation handled here',
      obj(2, { [marks.handled]: '1' }),
      { seen: true, triggered: false, handledHere: 2 },
      undefined,
    ],
    [
      'handled here at an older generation',
      obj(3, { [marks.handled]: '1' }),
      { seen: true, triggered: false, handledHere: 2 },
      'update',
    ],
    [
      'failed permanently here, not in the cache yet',
      obj(2, { [marks.handled]: '1' }),
      { seen: true, triggered: false, failedHere: 2 },
      undefined,
    ],
  ])('%s → %p', (_case, object, state, expected) => {
    expect(decideCause(object, marks, state)).toBe(expected);
  });

  it('names its two annotations under the prefix', () => {
    expect(marks).toEqual({
      handled: 'test.example.com/last-handled-generation',
      permanentFailure: 'test.example.com/permanent-failure-generation',
    });
  });
});

describe('failureMemory: a permanent failure remembered here, until the object says otherwise', () => {
  const unconfirmed = { generation: 2, confirmed: false };
  const confirmed = { generation: 2, confirmed: true };
  it.each([
    ['nothing remembered', obj(2), undefined, undefined],
    ['our annotation not in the cache yet: keep waiting for it', obj(2), unconfirmed, unconfirmed],
    [
      'the cache shows our annotation: confirmed',
      obj(2, { [marks.permanentFailure]: '2' }),
      unconfirmed,
      confirmed,
    ],
    ['still shown', obj(2, { [marks.permanentFailure]: '2' }), confirmed, confirmed],
    ['removed by a person after it was shown: forgotten (retry)', obj(2), confirmed, undefined],
    ['the generation moved on: forgotten', obj(3), unconfirmed, undefined],
    [
      'an annotation for another generation does not confirm',
      obj(2, { [marks.permanentFailure]: '1' }),
      unconfirmed,
      unconfirmed,
    ],
  ])('%s', (_case, object, failed, expected) => {
    expect(failureMemory(object, marks, failed)).toEqual(expected);
  });

  it('together with decideCause: clearing the annotation makes the generation run again', () => {
    const cleared = obj(2, { [marks.handled]: '1' });
    const failed = failureMemory(cleared, marks, confirmed);
    expect(
      decideCause(cleared, marks, { seen: true, triggered: false, failedHere: failed?.generation }),
    ).toBe('update');
  });
});

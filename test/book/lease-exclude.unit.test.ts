import { describe, expect, it } from '@jest/globals';
import { excludes, skipExcluded } from '../../book/lease-exclude.js';

describe('a ranking walk skips the proxies a request excludes (lease-exclude.ts)', () => {
  const outsideScope = (id: string) => id.startsWith('other/');

  it.each<[string, ReadonlySet<string> | undefined, string, boolean, string[]]>([
    ['no exclusion: the scope alone', undefined, 'ns/a', false, []],
    ['no exclusion: outside the scope', undefined, 'other/x', true, []],
    ['an empty exclusion is none', new Set(), 'ns/a', false, []],
    ['excluded: skipped and noted', new Set(['ns/a']), 'ns/a', true, ['ns/a']],
    ['not excluded: kept', new Set(['ns/a']), 'ns/b', false, []],
    [
      'excluded but outside the scope: skipped, not noted (no match)',
      new Set(['other/x']),
      'other/x',
      true,
      [],
    ],
  ])('%s', (_case, exclude, id, skipped, noted) => {
    const seen = new Set<string>();
    const skip = skipExcluded(outsideScope, exclude, seen);
    expect(skip?.(id) ?? false).toBe(skipped);
    expect([...seen]).toEqual(noted);
  });

  it('without a scope nor an exclusion there is no predicate (nothing to step over)', () => {
    expect(skipExcluded(undefined, undefined, new Set())).toBeUndefined();
    expect(excludes(undefined)).toBe(false);
    expect(excludes(new Set(['ns/a']))).toBe(true);
  });
});

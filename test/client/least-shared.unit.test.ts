// The live leases of a host, found least shared first (client/src/crawlee/least-shared.ts).
import { LeastShared } from '../../client/src/crawlee/least-shared.js';

/** Runs steps such as `add a, count a 2, delete a` on an empty set. */
function after(steps: string): LeastShared<string> {
  const set = new LeastShared<string>();
  for (const step of steps.split(',').map((s) => s.trim().split(' '))) {
    const [op, item, users] = step as [string, string, string | undefined];
    if (op === 'add') set.add(item);
    else if (op === 'count') set.count(item, Number(users));
    else if (op === 'delete') set.delete(item);
    else if (op !== '') throw new Error(`unknown step ${op}`);
  }
  return set;
}

describe('LeastShared', () => {
  it.each<[string, string, string | undefined]>([
    ['an empty set has none', '', undefined],
    ['a new item has no users, so it comes before a used one', 'add a, count a 2, add b', 'b'],
    ['fewest users first, whatever the order they were added in', 'add a, add b, count a 3, count b 1', 'b'],
    ['between equals, the one that came to that count first', 'add a, add b, count b 1, count a 1', 'b'],
    ['an item whose users left counts as unused again', 'add a, add b, count a 2, count b 1, count a 0', 'a'],
    ['a deleted item is never found', 'add a, add b, count b 4, delete a', 'b'],
    ['counting an item not in the set adds it', 'count a 1', 'a'],
  ])('%s', (_, steps, least) => {
    expect(after(steps).least(() => true)).toBe(least);
  });

  it('skips the items the caller refuses and takes the next least shared', () => {
    const set = after('add a, add b, add c, count b 1, count c 2');
    expect(set.least((item) => item !== 'a')).toBe('b');
    expect(set.least((item) => item === 'c')).toBe('c');
    expect(set.least(() => false)).toBeUndefined();
  });

  it('counts the items with a given number of users', () => {
    const set = after('add a, add b, add c, count c 1, delete b');
    expect([set.withUsers(0), set.withUsers(1), set.withUsers(2), set.size]).toEqual([1, 1, 0, 2]);
  });

  it('lists every item in the order it was added, whatever its count', () => {
    const set = after('add a, add b, add c, count a 3, delete b, add d');
    expect([...set]).toEqual(['a', 'c', 'd']);
    expect([set.has('a'), set.has('b'), set.delete('b')]).toEqual([true, false, false]);
  });
});

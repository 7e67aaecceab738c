import { SortedBlocks } from '../../book/sorted-blocks.js';

describe('SortedBlocks', () => {
  it('stays sorted and complete through thousands of random inserts and removals (blocks split and empty)', () => {
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const blocks = new SortedBlocks<number>((a, b) => a < b);
    const reference = new Set<number>();
    for (let step = 0; step < 20_000; step++) {
      const value = Math.floor(random() * 5000);
      if (random() < 0.6) {
        if (!reference.has(value)) {
          blocks.insert(value);
          reference.add(value);
        }
      } else {
        expect(blocks.remove(value)).toBe(reference.has(value));
        reference.delete(value);
      }
      if (step % 1000 === 0) {
        expect([...blocks]).toEqual([...reference].sort((a, b) => a - b));
        expect(blocks.size).toBe(reference.size);
      }
    }
    expect([...blocks]).toEqual([...reference].sort((a, b) => a - b));
    for (const value of [...reference]) expect(blocks.remove(value)).toBe(true);
    expect([...blocks]).toEqual([]);
    expect(blocks.size).toBe(0);
    expect(blocks.remove(1)).toBe(false);
  });

  it.each([
    [0, 0, 0],
    [0, 1, 1],
    [-5, 10_000, 2000],
    [1, 3, 1],
    [255, 1025, 385],
    [3998, 3999, 1],
    [4000, 5000, 0],
  ])(
    'counts the entries from %d (inclusive) to %d (exclusive) across many blocks: %d',
    (from, to, expected) => {
      const blocks = new SortedBlocks<number>((a, b) => a < b);
      // 0, 2, ..., 3998, inserted backwards: 2,000 entries over many blocks.
      for (let v = 3998; v >= 0; v -= 2) blocks.insert(v);
      expect(blocks.countBetween(from, to)).toBe(expected);
    },
  );

  it('counts nothing when empty', () => {
    expect(new SortedBlocks<number>((a, b) => a < b).countBetween(0, 10)).toBe(0);
  });
});

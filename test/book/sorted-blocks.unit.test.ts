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
});

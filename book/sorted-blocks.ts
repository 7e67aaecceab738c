// A sorted sequence kept as a list of small sorted blocks: insert and remove cost a binary
// search plus a splice within one block (at most 2 × BLOCK entries), instead of moving half
// of one long array, so they stay cheap at tens of thousands of entries.

const BLOCK = 128;

export class SortedBlocks<T> {
  private readonly blocks: T[][] = [];
  size = 0;

  /** `before(a, b)`: a sorts strictly before b. Entries must be distinct under it. */
  constructor(private readonly before: (a: T, b: T) => boolean) {}

  insert(item: T): void {
    if (this.blocks.length === 0) {
      this.blocks.push([item]);
      this.size = 1;
      return;
    }
    const b = this.blockFor(item);
    const block = this.blocks[b];
    block.splice(this.position(block, item), 0, item);
    this.size++;
    if (block.length > 2 * BLOCK) this.blocks.splice(b + 1, 0, block.splice(BLOCK));
  }

  /** Removes the entry equal to `item` (neither sorts before the other); false if absent. */
  remove(item: T): boolean {
    if (this.blocks.length === 0) return false;
    const b = this.blockFor(item);
    const block = this.blocks[b];
    const at = this.position(block, item);
    if (at >= block.length || this.before(item, block[at])) return false;
    block.splice(at, 1);
    this.size--;
    if (block.length === 0) this.blocks.splice(b, 1);
    return true;
  }

  /**
   * Entries from `from` (inclusive) to `to` (exclusive), counted by their ranks: a binary
   * search and a sum over the blocks (at most size / BLOCK of them).
   */
  countBetween(from: T, to: T): number {
    return this.rank(to) - this.rank(from);
  }

  /** Entries sorting before `item`. */
  private rank(item: T): number {
    if (this.blocks.length === 0) return 0;
    const b = this.blockFor(item);
    let before = 0;
    for (let i = 0; i < b; i++) before += this.blocks[i].length;
    return before + this.position(this.blocks[b], item);
  }

  *[Symbol.iterator](): Generator<T> {
    for (const block of this.blocks) yield* block;
  }

  /** Visits the entries in order until `visit` answers false; answers whether it got to the end. */
  scan(visit: (item: T) => boolean): boolean {
    for (const block of this.blocks) {
      for (let i = 0; i < block.length; i++) if (!visit(block[i])) return false;
    }
    return true;
  }

  /** The first block whose last entry does not sort before `item` (else the last block). */
  private blockFor(item: T): number {
    let lo = 0;
    let hi = this.blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const block = this.blocks[mid];
      if (this.before(block[block.length - 1], item)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Where `item` is or belongs within one block. */
  private position(block: readonly T[], item: T): number {
    let lo = 0;
    let hi = block.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.before(block[mid], item)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

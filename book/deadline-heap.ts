// A binary min-heap of deadlines whose entries know their position, so an entry can be removed
// or moved in O(log n): leases expire in deadline order without scanning every lease.

export interface HeapEntry {
  deadline: number;
  /** Maintained by the heap; -1 when not in it. */
  heapIndex: number;
}

export class DeadlineHeap<T extends HeapEntry> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(entry: T): void {
    entry.heapIndex = this.items.length;
    this.items.push(entry);
    this.up(entry.heapIndex);
  }

  remove(entry: T): void {
    const at = entry.heapIndex;
    if (at < 0 || this.items[at] !== entry) return;
    const last = this.items.pop()!;
    entry.heapIndex = -1;
    if (last === entry) return;
    this.items[at] = last;
    last.heapIndex = at;
    this.down(this.up(at));
  }

  /** Re-positions an entry after its deadline changed. */
  update(entry: T): void {
    if (entry.heapIndex < 0) return;
    this.down(this.up(entry.heapIndex));
  }

  private up(at: number): number {
    const items = this.items;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (items[parent].deadline <= items[at].deadline) break;
      this.swap(at, parent);
      at = parent;
    }
    return at;
  }

  private down(at: number): void {
    const items = this.items;
    for (;;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let smallest = at;
      if (left < items.length && items[left].deadline < items[smallest].deadline) smallest = left;
      if (right < items.length && items[right].deadline < items[smallest].deadline) smallest = right;
      if (smallest === at) return;
      this.swap(at, smallest);
      at = smallest;
    }
  }

  private swap(a: number, b: number): void {
    const items = this.items;
    [items[a], items[b]] = [items[b], items[a]];
    items[a].heapIndex = a;
    items[b].heapIndex = b;
  }
}

// The live leases of one host, kept in buckets by how many sessions use each. Crawlee's default
// pool makes a new session per request until it holds 1,000, and each one joins the least
// shared lease: over hundreds of leases a scan per new session was the integration's largest
// cost. Here the least shared one is found from the bottom bucket up.

/** A set whose items each carry a count of users, found fewest users first without a scan. */
export class LeastShared<T> {
  private readonly users = new Map<T, number>();
  /** buckets[n]: the items with n users, in the order they came to n. */
  private readonly buckets: Set<T>[] = [];

  get size(): number {
    return this.users.size;
  }

  has(item: T): boolean {
    return this.users.has(item);
  }

  /** Adds an item with `users` users (an item already here is only re-counted). */
  add(item: T, users = 0): void {
    this.count(item, users);
  }

  delete(item: T): boolean {
    const users = this.users.get(item);
    if (users === undefined) return false;
    this.users.delete(item);
    this.buckets[users]!.delete(item);
    return true;
  }

  /** Sets how many users an item has now; an item not here is added. */
  count(item: T, users: number): void {
    const before = this.users.get(item);
    if (before === users) return;
    if (before !== undefined) this.buckets[before]!.delete(item);
    this.users.set(item, users);
    for (let n = this.buckets.length; n <= users; n++) this.buckets.push(new Set());
    this.buckets[users]!.add(item);
  }

  /** How many items have exactly `users` users. */
  withUsers(users: number): number {
    return this.buckets[users]?.size ?? 0;
  }

  /** The first item `accept` takes, fewest users first (ties: the one that came to that count first). */
  least(accept: (item: T) => boolean): T | undefined {
    for (const bucket of this.buckets) {
      for (const item of bucket) if (accept(item)) return item;
    }
    return undefined;
  }

  /** Every item, in the order they were added. */
  [Symbol.iterator](): IterableIterator<T> {
    return this.users.keys();
  }
}

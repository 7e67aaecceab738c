// How many leasable proxies are cooling down for each target, for the memory store's refusals
// (issue 47 item 4): a request every leasable proxy could take is all_cooling_down when this
// count reaches the leasable count, known without walking them. Per target the counted
// proxies by cooldown end; an ended one leaves when next counted (lazily, at O(log n) each,
// once). The store keeps it to its free index's members (memory-lease-store.ts: a proxy's
// running cooldowns are placed again whenever it enters or leaves the index or its record
// changes, and a report that starts or extends one sets it). Each is counted for its class
// (proxy-classes.ts) and the target too, when given: a selector's or a scope's refusal counted
// per class.
//
// Memory: a client can fill the book with 10,000 (proxy, target) entries of junk targets, one
// proxy each (test/book/memory-caps.unit.test.ts): a key with one proxy holds it alone, not a
// heap (~200 bytes less each), and a class's entry shares its target's string.
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
import { SortedBlocks } from './sorted-blocks.js';
import { classExit } from './proxy-classes.js';

function lexBefore(a: string, b: string): boolean {
  return a < b;
}

interface Node extends HeapEntry {
  readonly proxyID: string;
  readonly target: string;
  /** On a target's node: the same cooldown counted for the proxy's class. */
  twin?: Node;
  /** On a class's node: the class. */
  readonly cls?: string;
  /** On a target's node: the proxy's exit member (exit-ip-match.ts's exitMember), when known. */
  exit?: string;
}

export class CoolingCounts {
  /** target → its counted proxies by cooldown end. */
  private readonly byTarget = new Slots();
  /** class → target → its counted proxies of the class by cooldown end. */
  private readonly byClass = new Map<string, Slots>();
  /** proxyID → target → its node. */
  private readonly byProxy = new Map<string, Map<string, Node>>();
  /** target → the exit members of its counted proxies with an exit, in exit order (a block's count). */
  private readonly byExit = new Map<string, SortedBlocks<string>>();
  /** target → the same by class, then exit (free-proxy-index.ts's classExit): a block's count in a class. */
  private readonly byClassExit = new Map<string, SortedBlocks<string>>();

  /**
   * The proxy cools down for the target until then (a cooldown only ever extends); counted
   * for its class (classKey) too when one is given, and by its exit (exitMember; '': none).
   */
  set(proxyID: string, target: string, until: number, cls?: string, exit = ''): void {
    let nodes = this.byProxy.get(proxyID);
    let node = nodes?.get(target);
    if (node !== undefined && (node.twin?.cls !== cls || (node.exit ?? '') !== exit)) {
      this.remove(node);
      node = undefined;
      nodes = this.byProxy.get(proxyID);
    }
    if (node !== undefined) {
      node.deadline = until;
      this.byTarget.updated(target, node);
      if (node.twin !== undefined) {
        node.twin.deadline = until;
        this.byClass.get(node.twin.cls!)!.updated(target, node.twin);
      }
      return;
    }
    if (nodes === undefined) {
      nodes = new Map();
      this.byProxy.set(proxyID, nodes);
    }
    const created: Node = { proxyID, target, deadline: until, heapIndex: -1 };
    nodes.set(target, created);
    this.byTarget.add(target, created);
    if (exit !== '') {
      created.exit = exit;
      let sorted = this.byExit.get(target);
      if (sorted === undefined) {
        sorted = new SortedBlocks(lexBefore);
        this.byExit.set(target, sorted);
      }
      sorted.insert(exit);
      if (cls !== undefined) {
        let inClass = this.byClassExit.get(target);
        if (inClass === undefined) {
          inClass = new SortedBlocks(lexBefore);
          this.byClassExit.set(target, inClass);
        }
        inClass.insert(classExit(cls, exit));
      }
    }
    if (cls !== undefined) {
      created.twin = { proxyID, target, deadline: until, heapIndex: -1, cls };
      let slots = this.byClass.get(cls);
      if (slots === undefined) {
        slots = new Slots();
        this.byClass.set(cls, slots);
      }
      slots.add(target, created.twin);
    }
  }

  /** Stops counting the proxy for any target. */
  dropProxy(proxyID: string): void {
    for (const node of [...(this.byProxy.get(proxyID)?.values() ?? [])]) this.remove(node);
  }

  /** Counted proxies cooling down for the target at now. */
  count(target: string, now: number): number {
    return this.pruned(this.byTarget, target, now).size(target);
  }

  /** When the first of their cooldowns ends, if any runs at now. */
  firstEnd(target: string, now: number): number | undefined {
    return this.pruned(this.byTarget, target, now).first(target)?.deadline;
  }

  /** Counted proxies of the class cooling down for the target at now. */
  countIn(cls: string, target: string, now: number): number {
    const slots = this.byClass.get(cls);
    return slots === undefined ? 0 : this.pruned(slots, target, now).size(target);
  }

  /** When the first of the class's cooldowns for the target ends, if any runs at now. */
  firstEndIn(cls: string, target: string, now: number): number | undefined {
    const slots = this.byClass.get(cls);
    return slots === undefined ? undefined : this.pruned(slots, target, now).first(target)?.deadline;
  }

  /** Counted proxies egressing from the block (exit-ip-match.ts's blockRange) cooling down for the target at now. */
  countBlock(target: string, block: { from: string; to: string }, now: number): number {
    this.pruned(this.byTarget, target, now);
    return this.byExit.get(target)?.countBetween(block.from, block.to) ?? 0;
  }

  /** The same, of the members of these classes (by key) only: a range count per class. */
  countBlockIn(
    classes: readonly string[],
    target: string,
    block: { from: string; to: string },
    now: number,
  ): number {
    this.pruned(this.byTarget, target, now);
    const sorted = this.byClassExit.get(target);
    if (sorted === undefined) return 0;
    let count = 0;
    for (const cls of classes)
      count += sorted.countBetween(classExit(cls, block.from), classExit(cls, block.to));
    return count;
  }

  /** The slots with the target's ended cooldowns gone (from every place they are counted). */
  private pruned(slots: Slots, target: string, now: number): Slots {
    for (
      let first = slots.first(target);
      first !== undefined && first.deadline <= now;
      first = slots.first(target)
    )
      this.remove(this.byProxy.get(first.proxyID)!.get(target)!);
    return slots;
  }

  private remove(node: Node): void {
    this.byTarget.remove(node.target, node);
    if (node.exit !== undefined) {
      const sorted = this.byExit.get(node.target)!;
      sorted.remove(node.exit);
      if (sorted.size === 0) this.byExit.delete(node.target);
      if (node.twin !== undefined) {
        const inClass = this.byClassExit.get(node.target)!;
        inClass.remove(classExit(node.twin.cls!, node.exit));
        if (inClass.size === 0) this.byClassExit.delete(node.target);
      }
    }
    const twin = node.twin;
    if (twin !== undefined) {
      const slots = this.byClass.get(twin.cls!)!;
      slots.remove(node.target, twin);
      if (slots.empty) this.byClass.delete(twin.cls!);
    }
    const nodes = this.byProxy.get(node.proxyID);
    nodes?.delete(node.target);
    if (nodes?.size === 0) this.byProxy.delete(node.proxyID);
  }
}

/** Nodes by key, by cooldown end: one alone, or a heap of two or more. */
class Slots {
  private readonly map = new Map<string, Node | DeadlineHeap<Node>>();

  get empty(): boolean {
    return this.map.size === 0;
  }

  add(key: string, node: Node): void {
    const slot = this.map.get(key);
    if (slot === undefined) this.map.set(key, node);
    else if (slot instanceof DeadlineHeap) slot.push(node);
    else {
      const heap = new DeadlineHeap<Node>();
      heap.push(slot);
      heap.push(node);
      this.map.set(key, heap);
    }
  }

  remove(key: string, node: Node): void {
    const slot = this.map.get(key);
    if (slot === node) this.map.delete(key);
    else if (slot instanceof DeadlineHeap) {
      slot.remove(node);
      if (slot.size === 0) this.map.delete(key);
    }
  }

  /** Places a node again after its deadline changed. */
  updated(key: string, node: Node): void {
    const slot = this.map.get(key);
    if (slot instanceof DeadlineHeap) slot.update(node);
  }

  first(key: string): Node | undefined {
    const slot = this.map.get(key);
    return slot instanceof DeadlineHeap ? slot.peek() : slot;
  }

  size(key: string): number {
    const slot = this.map.get(key);
    return slot === undefined ? 0 : slot instanceof DeadlineHeap ? slot.size : 1;
  }
}

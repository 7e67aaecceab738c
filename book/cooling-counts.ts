// How many leasable proxies are cooling down for each target, for the memory store's refusals
// (issue 47 item 4): a request every leasable proxy could take is all_cooling_down when this
// count reaches the leasable count, known without walking them. Per target a heap of the
// counted proxies' cooldown ends; an ended one leaves it when next counted (lazily, at O(log
// n) each, once). The store keeps it to its free index's members (memory-lease-store.ts:
// a proxy's running cooldowns are placed again whenever it enters or leaves the index or its
// record changes, and a report that starts or extends one sets it). Each is counted for its
// class (proxy-classes.ts) too, when given: a refusal of a selector or a scope counted per class.
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';

interface Node extends HeapEntry {
  readonly proxyID: string;
  readonly target: string;
}

export class CoolingCounts {
  /** target → its counted proxies by cooldown end (a heap and nothing more: the book may hold 10,000 targets). */
  private readonly byTarget = new Map<string, DeadlineHeap<Node>>();
  /** proxyID → target → its node. */
  private readonly byProxy = new Map<string, Map<string, Node>>();

  /**
   * The proxy cools down for the target until then (a cooldown only ever extends); counted
   * for its class (classKey) too when one is given.
   */
  set(proxyID: string, target: string, until: number, cls?: string): void {
    this.place(proxyID, target, until);
    if (cls !== undefined) this.place(proxyID, inClass(cls, target), until);
  }

  private place(proxyID: string, target: string, until: number): void {
    let nodes = this.byProxy.get(proxyID);
    const node = nodes?.get(target);
    if (node !== undefined) {
      node.deadline = until;
      this.byTarget.get(target)!.update(node);
      return;
    }
    if (nodes === undefined) {
      nodes = new Map();
      this.byProxy.set(proxyID, nodes);
    }
    const created: Node = { proxyID, target, deadline: until, heapIndex: -1 };
    nodes.set(target, created);
    let heap = this.byTarget.get(target);
    if (heap === undefined) {
      heap = new DeadlineHeap();
      this.byTarget.set(target, heap);
    }
    heap.push(created);
  }

  /** Stops counting the proxy for any target. */
  dropProxy(proxyID: string): void {
    for (const node of [...(this.byProxy.get(proxyID)?.values() ?? [])]) this.remove(node);
  }

  /** Counted proxies cooling down for the target at now. */
  count(target: string, now: number): number {
    return this.pruned(target, now)?.size ?? 0;
  }

  /** When the first of their cooldowns ends, if any runs at now. */
  firstEnd(target: string, now: number): number | undefined {
    return this.pruned(target, now)?.peek()?.deadline;
  }

  /** Counted proxies of the class cooling down for the target at now. */
  countIn(cls: string, target: string, now: number): number {
    return this.count(inClass(cls, target), now);
  }

  /** When the first of the class's cooldowns for the target ends, if any runs at now. */
  firstEndIn(cls: string, target: string, now: number): number | undefined {
    return this.firstEnd(inClass(cls, target), now);
  }

  private pruned(target: string, now: number): DeadlineHeap<Node> | undefined {
    const heap = this.byTarget.get(target);
    if (heap === undefined) return undefined;
    for (let first = heap.peek(); first !== undefined && first.deadline <= now; first = heap.peek())
      this.remove(first);
    return this.byTarget.get(target);
  }

  private remove(node: Node): void {
    const heap = this.byTarget.get(node.target);
    heap?.remove(node);
    if (heap?.size === 0) this.byTarget.delete(node.target);
    const nodes = this.byProxy.get(node.proxyID);
    nodes?.delete(node.target);
    if (nodes?.size === 0) this.byProxy.delete(node.proxyID);
  }
}

/** A (class, target) pair's key beside the targets': a class key is JSON, a target never holds \0. */
function inClass(cls: string, target: string): string {
  return `\u0000${cls}\u0000${target}`;
}

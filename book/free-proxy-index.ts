// Which leasable proxies have a free slot, kept in selection order so that a lease looks at
// a handful of proxies instead of scanning the fleet. One ladder per attribute term (and one
// for all proxies): level n holds the free proxies with n live leases, each level sorted by
// (latency, id). A lease walks the ladder of the selector's rarest term from level 0 up.
// With classes on (the memory store's), it also counts per proxy class (proxy-classes.ts) its
// members and how many of them have a free slot: a refusal counted without a walk.
import type { ProxyRecord } from './catalog.js';
import { classExit, ProxyClasses, type ProxyClass } from './proxy-classes.js';
import type { Candidate } from './lease-selection.js';
import { attributeTerm, proxyMatcher, selectorTerms } from './selector.js';
import { blockRange, exitMember, type ExitIPTerm } from './exit-ip-match.js';
import { SortedBlocks } from './sorted-blocks.js';

const ALL = '';

export class FreeProxyIndex {
  private readonly ladders = new Map<string, Ladder>();
  /** Every leasable proxy (free or full), by term: answers "does anything match at all?". */
  private readonly leasable = new Map<string, Map<string, ProxyRecord>>();
  /** Per class, its members with a free slot (members: the class's own count). */
  private readonly classes: ProxyClasses<{ free: number }> | undefined;
  /** With classes on: the members with an exit IP, and those with a free slot, by exit (exit-ip-match.ts). */
  private readonly exits: { all: SortedBlocks<string>; free: SortedBlocks<string> } | undefined;
  /** The same by class, then exit (classExit): a block's members in a class, counted. */
  private readonly classExits: { all: SortedBlocks<string>; free: SortedBlocks<string> } | undefined;

  constructor(options: { classes?: boolean } = {}) {
    if (options.classes === true) {
      this.classes = new ProxyClasses(() => ({ free: 0 }));
      this.exits = { all: new SortedBlocks(lexBefore), free: new SortedBlocks(lexBefore) };
      this.classExits = { all: new SortedBlocks(lexBefore), free: new SortedBlocks(lexBefore) };
    }
  }

  /** Starts tracking a leasable proxy at its current load. */
  add(proxy: ProxyRecord, load: number): void {
    const entry = this.classes?.join(proxy);
    if (entry !== undefined && load < proxy.maxLeases) entry.data.free++;
    const exit = this.exits === undefined ? '' : exitMember(proxy);
    if (exit !== '') {
      const inClass = classExitOf(proxy, entry!.key, exit);
      this.exits!.all.insert(exit);
      this.classExits!.all.insert(inClass);
      if (load < proxy.maxLeases) {
        this.exits!.free.insert(exit);
        this.classExits!.free.insert(inClass);
      }
    }
    for (const term of termsOf(proxy)) {
      let members = this.leasable.get(term);
      if (members === undefined) {
        members = new Map();
        this.leasable.set(term, members);
      }
      members.set(proxy.id, proxy);
      if (load < proxy.maxLeases) this.ladder(term).insert(proxy, load);
    }
  }

  /** Stops tracking a proxy added with add(); `load` must be its current load. */
  delete(proxy: ProxyRecord, load: number): void {
    const entry = this.classes?.get(proxy);
    if (entry !== undefined) {
      if (load < proxy.maxLeases) entry.data.free--;
      this.classes!.leave(entry.key);
    }
    const exit = this.exits === undefined ? '' : exitMember(proxy);
    if (exit !== '') {
      const inClass = classExitOf(proxy, entry!.key, exit);
      this.exits!.all.remove(exit);
      this.classExits!.all.remove(inClass);
      if (load < proxy.maxLeases) {
        this.exits!.free.remove(exit);
        this.classExits!.free.remove(inClass);
      }
    }
    for (const term of termsOf(proxy)) {
      const members = this.leasable.get(term);
      members?.delete(proxy.id);
      if (members?.size === 0) this.leasable.delete(term);
      if (load < proxy.maxLeases) this.dropFromLadder(term, proxy, load);
    }
  }

  /** Moves a tracked proxy from one load to another (a lease taken, released or expired). */
  move(proxy: ProxyRecord, from: number, to: number): void {
    const entry = this.classes?.get(proxy);
    if (entry !== undefined) entry.data.free += Number(to < proxy.maxLeases) - Number(from < proxy.maxLeases);
    const exit = this.exits === undefined ? '' : exitMember(proxy);
    if (exit !== '' && from < proxy.maxLeases !== to < proxy.maxLeases) {
      const inClass = classExitOf(proxy, entry!.key, exit);
      if (to < proxy.maxLeases) {
        this.exits!.free.insert(exit);
        this.classExits!.free.insert(inClass);
      } else {
        this.exits!.free.remove(exit);
        this.classExits!.free.remove(inClass);
      }
    }
    for (const term of termsOf(proxy)) {
      if (from < proxy.maxLeases) this.dropFromLadder(term, proxy, from);
      if (to < proxy.maxLeases) this.ladder(term).insert(proxy, to);
    }
  }

  has(proxyID: string): boolean {
    return this.leasable.get(ALL)?.has(proxyID) ?? false;
  }

  /**
   * Free proxies matching every selector pair in selection order: fewest leases, then lowest
   * latency, then id. Walks the ladder of the rarest term and checks the others per proxy.
   */
  *free(selector: Readonly<Record<string, string>>, exitIP?: ExitIPTerm): Generator<Candidate> {
    const walk = this.walkFor(selector, exitIP);
    if (walk === undefined) return;
    for (const entry of walk.ladder.entries()) if (walk.matches(entry.proxy)) yield entry;
  }

  /**
   * The same walk as free(), as plain loops: `visit` gets each proxy and its load level in
   * that order until it answers false. For a caller that steps over many entries per walk
   * (the Redis store's ranking): free()'s nested generators cost ~0.1 µs per entry.
   */
  scan(
    selector: Readonly<Record<string, string>>,
    exitIP: ExitIPTerm | undefined,
    visit: (proxy: ProxyRecord, load: number) => boolean,
  ): void {
    const walk = this.walkFor(selector, exitIP);
    if (walk === undefined) return;
    const { ladder, matches } = walk;
    ladder.scan((proxy, load) => !matches(proxy) || visit(proxy, load));
  }

  /** The ladder of the selector's rarest term and the check of the rest, or none to walk. */
  private walkFor(
    selector: Readonly<Record<string, string>>,
    exitIP: ExitIPTerm | undefined,
  ): { ladder: Ladder; matches: (proxy: ProxyRecord) => boolean } | undefined {
    const terms = selectorTerms(selector);
    let ladder = terms.length === 0 ? this.ladders.get(ALL) : undefined;
    for (const term of terms) {
      const candidate = this.ladders.get(term);
      if (candidate === undefined) return undefined;
      if (ladder === undefined || candidate.size < ladder.size) ladder = candidate;
    }
    if (ladder === undefined) return undefined;
    // The exit IP is not indexed (a CIDR is no equality term): checked per proxy on the ladder.
    const matches = terms.length > 1 || exitIP !== undefined ? proxyMatcher(selector, exitIP) : () => true;
    return { ladder, matches };
  }

  /**
   * Leasable proxies (free or full) matching the selector, inside the token's scope (`within`);
   * used only to explain a refusal.
   */
  countLeasable(
    selector: Readonly<Record<string, string>>,
    exitIP?: ExitIPTerm,
    within?: (proxy: ProxyRecord) => boolean,
  ): number {
    const terms = selectorTerms(selector);
    if (terms.length === 0 && exitIP === undefined && within === undefined)
      return this.leasable.get(ALL)?.size ?? 0;
    let smallest: Map<string, ProxyRecord> | undefined;
    for (const term of terms) {
      const members = this.leasable.get(term);
      if (members === undefined) return 0;
      if (smallest === undefined || members.size < smallest.size) smallest = members;
    }
    smallest ??= this.leasable.get(ALL);
    if (smallest === undefined) return 0;
    if (terms.length === 1 && exitIP === undefined && within === undefined) return smallest.size;
    const matches = proxyMatcher(selector, exitIP);
    let count = 0;
    for (const proxy of smallest.values())
      if (matches(proxy) && (within === undefined || within(proxy))) count++;
    return count;
  }

  /**
   * The classes of tracked proxies a request with this selector and scope matches, each with
   * its members and free ones; undefined when classes are off or more than MAX_COUNTED_CLASSES match.
   */
  matchingClasses(
    selector: Readonly<Record<string, string>>,
    within: ((proxy: ProxyRecord) => boolean) | undefined,
  ): ProxyClass<{ free: number }>[] | undefined {
    return this.classes?.matching(selector, within);
  }

  /**
   * With classes on: how many tracked proxies egress from the block, and how many of them
   * have a free slot, counted in the exit-ordered sets (no proxy looked at); undefined when off.
   */
  countBlock(block: ExitIPTerm): { members: number; free: number } | undefined {
    if (this.exits === undefined) return undefined;
    const { from, to } = blockRange(block);
    return { members: this.exits.all.countBetween(from, to), free: this.exits.free.countBetween(from, to) };
  }

  /**
   * With classes on: how many tracked proxies of these classes (by key) egress from the block,
   * and how many of them have a free slot: two range counts per class, no proxy looked at.
   */
  countBlockIn(classes: readonly string[], block: ExitIPTerm): { members: number; free: number } | undefined {
    if (this.classExits === undefined) return undefined;
    const { from, to } = blockRange(block);
    let members = 0;
    let free = 0;
    for (const key of classes) {
      const [lo, hi] = [classExit(key, from), classExit(key, to)];
      members += this.classExits.all.countBetween(lo, hi);
      free += this.classExits.free.countBetween(lo, hi);
    }
    return { members, free };
  }

  private ladder(term: string): Ladder {
    let ladder = this.ladders.get(term);
    if (ladder === undefined) {
      ladder = new Ladder();
      this.ladders.set(term, ladder);
    }
    return ladder;
  }

  private dropFromLadder(term: string, proxy: ProxyRecord, load: number): void {
    const ladder = this.ladders.get(term);
    if (ladder === undefined) return;
    ladder.remove(proxy, load);
    if (ladder.size === 0) this.ladders.delete(term);
  }
}

/** Records are immutable: each one's place in the by-class exit sets is computed once. */
const classExits = new WeakMap<ProxyRecord, string>();

function classExitOf(proxy: ProxyRecord, key: string, exit: string): string {
  let member = classExits.get(proxy);
  if (member === undefined) {
    member = classExit(key, exit);
    classExits.set(proxy, member);
  }
  return member;
}

/** Records are immutable, so each one's index terms are computed once. */
const termsCache = new WeakMap<ProxyRecord, readonly string[]>();

function termsOf(proxy: ProxyRecord): readonly string[] {
  let terms = termsCache.get(proxy);
  if (terms === undefined) {
    terms = [ALL, ...Object.entries(proxy.attributes).map(([key, value]) => attributeTerm(key, value))];
    termsCache.set(proxy, terms);
  }
  return terms;
}

/** Free proxies by load level, each level sorted by (latency, id). */
class Ladder {
  private readonly levels: SortedBlocks<ProxyRecord>[] = [];
  size = 0;

  insert(proxy: ProxyRecord, load: number): void {
    while (this.levels.length <= load) this.levels.push(new SortedBlocks(before));
    this.levels[load].insert(proxy);
    this.size++;
  }

  remove(proxy: ProxyRecord, load: number): void {
    if (this.levels[load]?.remove(proxy) !== true) return;
    this.size--;
    // An emptied level stays (the walk skips it): dropping it made a lease+release that took
    // a level from 0 to 1 entry and back build a new one each time.
  }

  *entries(): Generator<Candidate> {
    for (let load = 0; load < this.levels.length; load++) {
      const level = this.levels[load];
      if (level.size > 0) for (const proxy of level) yield { proxy, load };
    }
  }

  /** entries() as plain loops, until `visit` answers false. */
  scan(visit: (proxy: ProxyRecord, load: number) => boolean): void {
    for (let load = 0; load < this.levels.length; load++) {
      const level = this.levels[load];
      if (level.size > 0 && !level.scan((proxy) => visit(proxy, load))) return;
    }
  }
}

function lexBefore(a: string, b: string): boolean {
  return a < b;
}

function before(a: ProxyRecord, b: ProxyRecord): boolean {
  if (a.latencyMillis !== b.latencyMillis) return a.latencyMillis < b.latencyMillis;
  return a.id < b.id;
}

// What the in-memory store remembers per (proxy, target): the running cooldown, the streak of
// consecutive bad reports that sets the next cooldown's length, and recent report counts for
// that target. The target-less "global pool" is a target of its own (key ''). Targets are
// client-supplied, so memory is capped per proxy and overall. At a cap the entry whose
// cooldown ended longest ago is forgotten (a streak, an ended cooldown), never a running
// one: when every entry there still runs, the new target is not recorded ('capped').
import { COOLDOWN_JITTER, cooldownKindOf, restMillis, type CooldownRules } from './cooldown-policy.js';
import type { OutcomeCounts, ReportResult } from './lease-store.js';
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
import { failures, OutcomeWindow } from './outcome-window.js';
import { agreed, runningReporters, withReporter } from './ban-agreement.js';

/** Distinct targets remembered per proxy. */
export const MAX_TARGETS_PER_PROXY = 1000;
/**
 * (proxy, target) entries remembered across all proxies: ~1 KiB each, so a client filling the
 * cap costs ~12 MiB of the Deployment's 160 MiB heap (test/book/memory-caps.unit.test.ts).
 */
export const MAX_TARGET_ENTRIES = 10_000;

/** An entry's place in a heap ordered by its cooldown's end. */
interface EndNode extends HeapEntry {
  readonly entry: TargetEntry;
}

/** One kind of rest (ban or rate limit) for one (proxy, target). */
interface Rest {
  /** Consecutive reports of this kind; an ok report resets it. */
  streak: number;
  /** End of this kind's cooldown (ms since the epoch); 0 = none yet. */
  until: number;
}

export interface TargetEntry {
  readonly proxyID: string;
  readonly target: string;
  readonly ban: Rest;
  readonly rate: Rest;
  /** End of the running cooldown, whichever kind (ms since the epoch); 0 = none yet. */
  until: number;
  readonly window: OutcomeWindow;
  /** Who reported the cooldown, with the end their report gave (ban-agreement.ts). */
  readonly reporters: Map<string, number>;
  /** Its places in the book-wide and the per-proxy heaps of cooldown ends. */
  ends?: { all: EndNode; proxy: EndNode };
}

/** The report results the book keeps per target (unreachable is about the proxy, not a target). */
export type TargetReport = Exclude<ReportResult, 'unreachable'>;

export interface TargetBookOptions {
  rules: CooldownRules;
  bucketMillis: number;
  random: () => number;
  maxTargetsPerProxy?: number;
  maxEntries?: number;
}

/** What targetBookFor reads of a store's settings (lease-book-settings.ts's, which import this module). */
export interface TargetBookSettings {
  banBaseMillis: number;
  banMaxMillis: number;
  rateLimitBaseMillis: number;
  rateLimitMaxMillis: number;
  singleCooldownWindow: boolean;
  bucketMillis: number;
  maxTargetsPerProxy: number;
  maxTargetEntries: number;
}

/** The target book of a store's settings (the memory store's; the Redis one keeps its own in Redis). */
export function targetBookFor(settings: TargetBookSettings, random: () => number): TargetBook {
  const rest = (baseMillis: number, maxMillis: number) => ({
    baseMillis,
    maxMillis,
    jitter: COOLDOWN_JITTER,
  });
  return new TargetBook({
    rules: {
      banned: rest(settings.banBaseMillis, settings.banMaxMillis),
      rateLimited: rest(settings.rateLimitBaseMillis, settings.rateLimitMaxMillis),
      single: settings.singleCooldownWindow,
    },
    bucketMillis: settings.bucketMillis,
    random,
    maxTargetsPerProxy: settings.maxTargetsPerProxy,
    maxEntries: settings.maxTargetEntries,
  });
}

export class TargetBook {
  /** Every entry, least recently reported first. */
  private readonly entries = new Map<string, TargetEntry>();
  /** proxyID → target → entry, least recently reported first. */
  private readonly byProxy = new Map<string, Map<string, TargetEntry>>();
  /** target → proxyID → entry: the proxies with a record for one target. */
  private readonly byTarget = new Map<string, Map<string, TargetEntry>>();
  /** Every entry by its cooldown's end, earliest first: what a cap may forget. */
  private readonly ends = new DeadlineHeap<EndNode>();
  private readonly endsByProxy = new Map<string, DeadlineHeap<EndNode>>();
  private readonly maxTargetsPerProxy: number;
  private readonly maxEntries: number;
  evictions = 0;

  constructor(private readonly options: TargetBookOptions) {
    this.maxTargetsPerProxy = options.maxTargetsPerProxy ?? MAX_TARGETS_PER_PROXY;
    this.maxEntries = options.maxEntries ?? MAX_TARGET_ENTRIES;
  }

  /**
   * Records a report. banned/rate_limited lengthen their own streak and start (or extend,
   * never shorten) their own cooldown (see CooldownRules); ok resets both streaks and leaves a
   * running cooldown alone. Returns the cooldown's end when the report started one, or
   * 'capped' when a new target could not be recorded (every entry at a cap still runs).
   */
  report(
    proxyID: string,
    target: string,
    result: TargetReport,
    now: number,
    retryAfterMillis?: number,
    reporter: { name: string; trusted: boolean } = { name: '', trusted: true },
  ): number | 'capped' | undefined {
    let entry = this.touch(proxyID, target);
    if (result === 'ok') {
      // An ok for a pair we know nothing bad about needs no memory.
      if (entry === undefined) return undefined;
      entry.ban.streak = 0;
      entry.rate.streak = 0;
      entry.window.add(result, now);
      return undefined;
    }
    entry ??= this.create(proxyID, target, now);
    if (entry === undefined) return 'capped';
    const { rules } = this.options;
    const kind = cooldownKindOf(result, rules);
    const rest = kind === 'rate' ? entry.rate : entry.ban;
    const maxMillis = (kind === 'rate' ? rules.rateLimited : rules.banned).maxMillis;
    // A streak goes cold when no bad report came for a whole maximum cooldown after the last ended.
    if (rest.until + maxMillis <= now) rest.streak = 0;
    rest.streak++;
    entry.window.add(result, now);
    rest.until = Math.max(
      rest.until,
      now + restMillis(kind, rest.streak, rules, this.options.random(), retryAfterMillis),
    );
    entry.until = Math.max(entry.ban.until, entry.rate.until);
    withReporter(entry.reporters, reporter.name, reporter.trusted, rest.until, now);
    entry.ends!.all.deadline = entry.until;
    entry.ends!.proxy.deadline = entry.until;
    this.ends.update(entry.ends!.all);
    this.endsByProxy.get(proxyID)!.update(entry.ends!.proxy);
    return rest.until;
  }

  coolingDown(proxyID: string, target: string, now: number): boolean {
    return (this.byProxy.get(proxyID)?.get(target)?.until ?? 0) > now;
  }

  /** The end of (proxy, target)'s cooldown, whichever kind (0: no entry). */
  until(proxyID: string, target: string): number {
    return this.byProxy.get(proxyID)?.get(target)?.until ?? 0;
  }

  /** Recent counts for (proxy, target) when it has had a bad report in the window. */
  failingRecord(proxyID: string, target: string, now: number): OutcomeCounts | undefined {
    const entry = this.byProxy.get(proxyID)?.get(target);
    if (entry === undefined) return undefined;
    const counts = entry.window.totals(now);
    return failures(counts) > 0 ? counts : undefined;
  }

  /** Entries for one target (any order): the only proxies that can be cooling down for it. */
  forTarget(target: string): Iterable<TargetEntry> {
    return this.byTarget.get(target)?.values() ?? [];
  }

  /** One proxy's running cooldowns, by target (at most maxTargetsPerProxy). */
  cooldownsOf(
    proxyID: string,
    now: number,
  ): { target: string; until: number; agreed: boolean; reporters?: string[] }[] {
    const running: { target: string; until: number; agreed: boolean; reporters?: string[] }[] = [];
    for (const entry of this.byProxy.get(proxyID)?.values() ?? []) {
      if (entry.until > now)
        running.push({
          target: entry.target,
          until: entry.until,
          agreed: agreed(entry.reporters, now),
          ...runningReporters(entry.reporters, now),
        });
    }
    return running;
  }

  /** Whether the book holds anything of the proxy's (a cooldown, a streak, a window). */
  hasProxy(proxyID: string): boolean {
    return this.byProxy.has(proxyID);
  }

  /**
   * Forgets everything the book holds of one proxy, running cooldowns included: what its
   * address earned no longer applies (egress.ts). Returns how many cooldowns were running.
   */
  forgetProxy(proxyID: string, now: number): number {
    const entries = [...(this.byProxy.get(proxyID)?.values() ?? [])];
    for (const entry of entries) this.forget(entry);
    return entries.filter((e) => e.until > now).length;
  }

  activeCooldowns(now: number): number {
    let count = 0;
    for (const entry of this.entries.values()) if (entry.until > now) count++;
    return count;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Forgets entries that no longer matter: no running cooldown, no report in the window, and
   * a streak that has gone cold (no bad report for a whole maximum cooldown after the last
   * one ended). Correctness never waits for this; it only bounds memory.
   */
  sweep(now: number): void {
    const { rules } = this.options;
    for (const entry of this.entries.values()) {
      if (entry.ban.until + rules.banned.maxMillis > now || !entry.window.isEmpty(now)) continue;
      if (entry.rate.until + rules.rateLimited.maxMillis > now) continue;
      this.forget(entry);
    }
  }

  private touch(proxyID: string, target: string): TargetEntry | undefined {
    const perProxy = this.byProxy.get(proxyID);
    const entry = perProxy?.get(target);
    if (entry === undefined) return undefined;
    // Move to the most recently reported end of both LRU orders.
    const id = entryKey(proxyID, target);
    this.entries.delete(id);
    this.entries.set(id, entry);
    perProxy!.delete(target);
    perProxy!.set(target, entry);
    return entry;
  }

  /** A new entry, making room at a cap from an ended cooldown; undefined when none has ended. */
  private create(proxyID: string, target: string, now: number): TargetEntry | undefined {
    let perProxy = this.byProxy.get(proxyID);
    if (perProxy !== undefined && perProxy.size >= this.maxTargetsPerProxy) {
      const earliest = this.endsByProxy.get(proxyID)!.peek()!;
      if (earliest.deadline > now) return undefined;
      this.evict(earliest.entry);
    }
    if (this.entries.size >= this.maxEntries) {
      const earliest = this.ends.peek()!;
      if (earliest.deadline > now) return undefined;
      this.evict(earliest.entry);
    }
    const entry: TargetEntry = {
      proxyID,
      target,
      ban: { streak: 0, until: 0 },
      rate: { streak: 0, until: 0 },
      until: 0,
      window: new OutcomeWindow(this.options.bucketMillis),
      reporters: new Map(),
    };
    const ends = { all: { entry, deadline: 0, heapIndex: -1 }, proxy: { entry, deadline: 0, heapIndex: -1 } };
    entry.ends = ends;
    this.ends.push(ends.all);
    let heap = this.endsByProxy.get(proxyID);
    if (heap === undefined) {
      heap = new DeadlineHeap<EndNode>();
      this.endsByProxy.set(proxyID, heap);
    }
    heap.push(ends.proxy);
    this.entries.set(entryKey(proxyID, target), entry);
    perProxy = this.byProxy.get(proxyID);
    if (perProxy === undefined) {
      perProxy = new Map();
      this.byProxy.set(proxyID, perProxy);
    }
    perProxy.set(target, entry);
    let perTarget = this.byTarget.get(target);
    if (perTarget === undefined) {
      perTarget = new Map();
      this.byTarget.set(target, perTarget);
    }
    perTarget.set(proxyID, entry);
    return entry;
  }

  private evict(entry: TargetEntry): void {
    this.evictions++;
    this.forget(entry);
  }

  private forget(entry: TargetEntry): void {
    this.entries.delete(entryKey(entry.proxyID, entry.target));
    if (entry.ends !== undefined) {
      this.ends.remove(entry.ends.all);
      const heap = this.endsByProxy.get(entry.proxyID);
      heap?.remove(entry.ends.proxy);
      if (heap?.size === 0) this.endsByProxy.delete(entry.proxyID);
    }
    const perProxy = this.byProxy.get(entry.proxyID);
    perProxy?.delete(entry.target);
    if (perProxy?.size === 0) this.byProxy.delete(entry.proxyID);
    const perTarget = this.byTarget.get(entry.target);
    perTarget?.delete(entry.proxyID);
    if (perTarget?.size === 0) this.byTarget.delete(entry.target);
  }
}

function entryKey(proxyID: string, target: string): string {
  // proxyIDs are namespace/name (no NUL); targets are printable ASCII (no NUL).
  return `${proxyID}\u0000${target}`;
}

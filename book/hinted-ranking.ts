// The Redis store's ranking (redis-lease-store.ts: "the replica ranks, Redis decides"): each
// leasable proxy of the replica's catalog with its load as last heard from Redis (a hint),
// walked in (hinted load, latency, id) order through a FreeProxyIndex.
//
// A raise is applied to the index lazily. A lease+release from this replica raises a proxy's
// hint and lowers it again a few milliseconds later; moving it in the index both times cost
// the client ~2-4 µs per move (three ladders, two sorted levels each), about a tenth of a
// round trip's client CPU (docs/benchmarks.md, issue 21's third round). A raised proxy stays
// where it was and the walk steps over it; a lowered one is placed at once. The walk stays
// exact: before it yields anything from a level above one it stepped over a raised proxy
// in, it places the raised proxies where their hints say and starts again, so a raised
// proxy is met at its own level, as if it had moved. At most MAX_LAGGING proxies wait raised
// (the oldest is placed when one more comes): a walk steps over no more than that.
import type { ProxyRecord } from './catalog.js';
import type { ExitIPTerm } from './exit-ip-match.js';
import { FreeProxyIndex } from './free-proxy-index.js';

/** Raised proxies left unplaced at most (each costs a walk one step over it). */
export const MAX_LAGGING = 256;

interface Entry {
  record: ProxyRecord;
  /** The record as the index holds it: never "full", so every proxy stays a candidate. */
  ranked: ProxyRecord;
  /** The load level `ranked` sits at in the index (its hint, or lower while raised lazily). */
  level: number;
}

export class HintedRanking {
  private readonly index = new FreeProxyIndex();
  private readonly entries = new Map<string, Entry>();
  /** Non-zero hints; a proxy absent here is hinted idle. */
  private readonly hints = new Map<string, number>();
  /** Proxies whose hint is above their level, oldest first. */
  private readonly lagging = new Set<string>();

  /** The catalog's record of a proxy this ranking holds, if leasable. */
  record(proxyID: string): ProxyRecord | undefined {
    return this.entries.get(proxyID)?.record;
  }

  /** A proxy's hinted load (0 when unknown). */
  load(proxyID: string): number {
    return this.hints.get(proxyID) ?? 0;
  }

  /** Proxies with a non-zero hint (the sweep asks Redis about these). */
  busy(): string[] {
    return [...this.hints.keys()];
  }

  /** Starts ranking a leasable record (or its new version) at its current hint. */
  add(record: ProxyRecord): void {
    this.delete(record.id);
    const ranked = { ...record, maxLeases: Number.MAX_SAFE_INTEGER };
    const level = this.load(record.id);
    this.entries.set(record.id, { record, ranked, level });
    this.index.add(ranked, level);
  }

  /** Stops ranking a proxy (its hint stays: a record of it may come back). */
  delete(proxyID: string): void {
    const entry = this.entries.get(proxyID);
    if (entry === undefined) return;
    this.index.delete(entry.ranked, entry.level);
    this.entries.delete(proxyID);
    this.lagging.delete(proxyID);
  }

  /** Records a proxy's load as Redis (or this replica's own lease in flight) says. */
  hint(proxyID: string, load: number): void {
    if (this.load(proxyID) === load) return;
    if (load === 0) this.hints.delete(proxyID);
    else this.hints.set(proxyID, load);
    const entry = this.entries.get(proxyID);
    if (entry === undefined) return;
    this.lagging.delete(proxyID);
    if (load > entry.level) {
      this.lagging.add(proxyID);
      if (this.lagging.size > MAX_LAGGING) this.place(this.entries.get(this.lagging.values().next().value!)!);
    } else if (load < entry.level) {
      this.index.move(entry.ranked, entry.level, load);
      entry.level = load;
    }
  }

  /**
   * The first `size` leasable proxies matching the selector in (hinted load, latency, id)
   * order, but those `skip` names: the index's walk, stepping over raised proxies until the
   * walk would pass their hint (see above). Plain loops: a walk steps over every proxy in
   * flight from this replica.
   */
  candidates(
    selector: Readonly<Record<string, string>>,
    exitIP: ExitIPTerm | undefined,
    size: number,
    skip?: (proxyID: string) => boolean,
  ): ProxyRecord[] {
    if (size <= 0) return [];
    for (;;) {
      const out: ProxyRecord[] = [];
      const skipped: Entry[] = [];
      this.index.scan(selector, exitIP, (proxy, level) => {
        // Past the level a raised proxy was stepped over in: place those first, walk again.
        if (skipped.length > 0 && level > skipped[0].level) return false;
        const id = proxy.id;
        if (skip?.(id) === true) return true;
        const entry = this.entries.get(id)!;
        if ((this.hints.get(id) ?? 0) > level) skipped.push(entry);
        else out.push(entry.record);
        return out.length < size;
      });
      if (out.length === size || skipped.length === 0) return out;
      for (const entry of skipped) this.place(entry);
    }
  }

  /** Moves a raised proxy to the level its hint says. */
  private place(entry: Entry): void {
    const id = entry.record.id;
    this.lagging.delete(id);
    // The entry may have gone (deleted) or been placed meanwhile.
    if (this.entries.get(id) !== entry) return;
    const load = this.load(id);
    if (load === entry.level) return;
    this.index.move(entry.ranked, entry.level, load);
    entry.level = load;
  }
}

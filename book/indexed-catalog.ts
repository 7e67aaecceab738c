// The catalog kept up to date change by change (never rebuilt from the whole fleet): records
// by id, ids in sorted order, and an attribute index (key=value → ids). List answers are
// cached per catalog version, so repeated lists cost a map lookup.
import type { CatalogChange, CatalogFilter, CatalogListener, ProxyCatalog, ProxyRecord } from './catalog.js';
import { exitIPMatches, type ExitIPTerm } from './exit-ip-match.js';
import { attributeTerm, selectorTerms } from './selector.js';

/** Distinct selectors whose list answers are kept (least recently used ones are dropped). */
const LIST_CACHE_ENTRIES = 128;

export class IndexedCatalog implements ProxyCatalog {
  private readonly byID = new Map<string, ProxyRecord>();
  private readonly sortedIDs: string[] = [];
  private readonly byTerm = new Map<string, Set<string>>();
  private readonly listeners = new Set<CatalogListener>();
  private readonly listCache = new Map<string, { version: number; records: readonly ProxyRecord[] }>();
  private currentVersion = 0;

  version(): number {
    return this.currentVersion;
  }

  get size(): number {
    return this.byID.size;
  }

  get(id: string): ProxyRecord | undefined {
    return this.byID.get(id);
  }

  records(): Iterable<ProxyRecord> {
    return this.byID.values();
  }

  list(filter: CatalogFilter = {}): readonly ProxyRecord[] {
    const key = canonical(filter);
    const cached = this.listCache.get(key);
    if (cached !== undefined && cached.version === this.currentVersion) {
      // Refresh its place in the LRU order.
      this.listCache.delete(key);
      this.listCache.set(key, cached);
      return cached.records;
    }
    // Not frozen (its records are, and callers get it as readonly): V8 slices a frozen array
    // on a slow path, ~15 us for a page of 200 against 0.3 us (docs/benchmarks.md).
    const records: readonly ProxyRecord[] = this.compute(
      filter.selector ?? {},
      filter.healthy,
      filter.exitIP,
    );
    this.listCache.delete(key);
    this.listCache.set(key, { version: this.currentVersion, records });
    if (this.listCache.size > LIST_CACHE_ENTRIES) this.listCache.delete(this.listCache.keys().next().value!);
    return records;
  }

  subscribe(listener: CatalogListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Adds or replaces a record; a record equal to the current one changes nothing. */
  upsert(record: ProxyRecord): void {
    const before = this.byID.get(record.id);
    if (before !== undefined && sameRecord(before, record)) return;
    const after = freeze(record);
    this.byID.set(after.id, after);
    if (before === undefined) insertSorted(this.sortedIDs, after.id);
    else this.unindex(before);
    this.index(after);
    this.changed({ before, after });
  }

  remove(id: string): void {
    const before = this.byID.get(id);
    if (before === undefined) return;
    this.byID.delete(id);
    removeSorted(this.sortedIDs, id);
    this.unindex(before);
    this.changed({ before });
  }

  /** Makes the catalog hold exactly `records`, as a series of upserts and removals. */
  replaceAll(records: readonly ProxyRecord[]): void {
    const keep = new Set(records.map((r) => r.id));
    for (const id of [...this.byID.keys()]) if (!keep.has(id)) this.remove(id);
    for (const record of records) this.upsert(record);
  }

  private compute(
    selector: Readonly<Record<string, string>>,
    healthy: boolean | undefined,
    exitIP: ExitIPTerm | undefined,
  ): ProxyRecord[] {
    const byHealth = healthy === undefined ? all : (r: ProxyRecord) => r.healthy === healthy;
    // A CIDR is no index term (0208): checked on each record the attribute index yields.
    const matches =
      exitIP === undefined ? byHealth : (r: ProxyRecord) => byHealth(r) && exitIPMatches(exitIP, r.exitIP);
    const terms = selectorTerms(selector);
    if (terms.length === 0) return this.sortedIDs.map((id) => this.byID.get(id)!).filter(matches);
    // Start from the rarest term; check the others on each record.
    let smallest: Set<string> | undefined;
    for (const term of terms) {
      const ids = this.byTerm.get(term);
      if (ids === undefined) return [];
      if (smallest === undefined || ids.size < smallest.size) smallest = ids;
    }
    const out: ProxyRecord[] = [];
    for (const id of smallest!) {
      const record = this.byID.get(id)!;
      if (matches(record) && terms.every((term) => this.byTerm.get(term)!.has(id))) out.push(record);
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  private index(record: ProxyRecord): void {
    for (const [key, value] of Object.entries(record.attributes)) {
      const term = attributeTerm(key, value);
      let ids = this.byTerm.get(term);
      if (ids === undefined) {
        ids = new Set();
        this.byTerm.set(term, ids);
      }
      ids.add(record.id);
    }
  }

  private unindex(record: ProxyRecord): void {
    for (const [key, value] of Object.entries(record.attributes)) {
      const term = attributeTerm(key, value);
      const ids = this.byTerm.get(term);
      ids?.delete(record.id);
      if (ids?.size === 0) this.byTerm.delete(term);
    }
  }

  private changed(change: CatalogChange): void {
    this.currentVersion++;
    for (const listener of this.listeners) listener(change);
  }
}

/** Records are shared by reference with every reader (and cached serializations): freeze them. */
function freeze(record: ProxyRecord): ProxyRecord {
  if (Object.isFrozen(record) && Object.isFrozen(record.attributes)) return record;
  return Object.freeze({ ...record, attributes: Object.freeze({ ...record.attributes }) });
}

export function sameRecord(a: ProxyRecord, b: ProxyRecord): boolean {
  if (
    a.id !== b.id ||
    a.ip !== b.ip ||
    a.port !== b.port ||
    a.phase !== b.phase ||
    a.healthy !== b.healthy ||
    a.latencyMillis !== b.latencyMillis ||
    a.exitIP !== b.exitIP ||
    a.maxLeases !== b.maxLeases ||
    a.healthReason !== b.healthReason ||
    (a.draining === true) !== (b.draining === true) ||
    (a.guarded === true) !== (b.guarded === true) ||
    // A rotated password must reach the next lease, though nothing else changed.
    a.credentials?.username !== b.credentials?.username ||
    a.credentials?.password !== b.credentials?.password
  ) {
    return false;
  }
  const aKeys = Object.keys(a.attributes);
  if (aKeys.length !== Object.keys(b.attributes).length) return false;
  return aKeys.every((key) => Object.hasOwn(b.attributes, key) && a.attributes[key] === b.attributes[key]);
}

const all = () => true;

function canonical({ selector = {}, healthy, exitIP }: CatalogFilter): string {
  const pairs = Object.entries(selector).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([healthy ?? null, exitIP?.text ?? null, pairs]);
}

function insertSorted(ids: string[], id: string): void {
  ids.splice(lowerBound(ids, id), 0, id);
}

function removeSorted(ids: string[], id: string): void {
  const at = lowerBound(ids, id);
  if (ids[at] === id) ids.splice(at, 1);
}

function lowerBound(ids: readonly string[], id: string): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

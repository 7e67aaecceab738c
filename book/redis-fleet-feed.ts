// What this replica tells the shared book of its leasable proxies and their caps: the fleet
// registry (redis-scripts.ts: P:fleet) that lets a refusal be known from counts instead of a
// walk (issue 47 item 4). Each change it sees goes in one background batch per turn of the
// event loop, like the egresses. Its fingerprint (fleet-fingerprint.ts) says which registry
// it expects: while the book's differs (a write on its way, another replica's catalog ahead
// or behind, a Redis that lost its keys), the acquire walks as before. The sweep compares
// them and, when they still differ with nothing on its way, sends the differences.
// Each member goes with its class (proxy-classes.ts): the book keeps its counts per class too,
// and a request with a selector or a scope sends the figures of the classes it matches.

import type { Logger } from 'pino';
import type { ProxyRecord } from './catalog.js';
import { classID, FleetFingerprint, type Fingerprint } from './fleet-fingerprint.js';
import { classKey, ProxyClasses } from './proxy-classes.js';
import { exitKey } from './exit-ip-match.js';

/**
 * A class a request matches, as the acquire sends it: its id, its figures ("count a b") and
 * how many of its members have an exit IP known (checked against the book's P:cxip).
 */
export interface ClassFigures {
  id: string;
  figures: string;
  exits: number;
}

/** Proxies per fleet script call. */
const FLEET_CHUNK = 500;

export interface FleetFeedDeps {
  /** The fleet script: count, then id, cap ('0': out), h1, h2, class, exit key per proxy; answers the book's figures. */
  send: (args: string[]) => Promise<unknown>;
  /** The registry's figures ('sum': count, a, b, null when none) or members ('all': flat id, "cap h1 h2 class", ...). */
  read: (what: 'sum' | 'all') => Promise<unknown>;
  logger: Logger;
}

export class RedisFleetFeed {
  private readonly own = new FleetFingerprint();
  /** This replica's leasable proxies' classes, each with its id in the book. */
  private readonly classes = new ProxyClasses<{ id: string }>(() => ({ id: '' }));
  /** Each member's class key, to leave it by. */
  private readonly classOf = new Map<string, string>();
  /** Each member with an exit IP known: its class id; and per class id, how many. */
  private readonly exitClassOf = new Map<string, string>();
  private readonly exitsIn = new Map<string, number>();
  /** Proxies whose entry is to be sent, in the order they changed. */
  private pending = new Set<string>();
  private flush: Promise<void> | undefined;
  private closed = false;
  constructor(private readonly deps: FleetFeedDeps) {}

  /** A proxy is leasable as this record says (undefined: not leasable, or gone from the catalog). */
  set(id: string, record: ProxyRecord | undefined): void {
    const before = this.entry(id);
    const key = record === undefined ? undefined : classKey(record);
    const oldKey = this.classOf.get(id);
    if (oldKey !== key) {
      if (oldKey !== undefined) this.classes.leave(oldKey);
      this.classOf.delete(id);
      if (record !== undefined && key !== undefined) {
        const entry = this.classes.join(record);
        if (entry.data.id === '') entry.data.id = classID(key);
        this.classOf.set(id, key);
      }
    }
    const cls = key === undefined ? '' : classID(key);
    const exit = exitKey(record?.exitIP);
    this.countExit(id, cls !== '' && exit !== '' ? cls : undefined);
    this.own.set(id, record?.maxLeases, cls, exit);
    if (this.entry(id) === before) return;
    this.pending.add(id);
    this.flush ??= this.sendPending();
  }

  /** The fingerprint the acquire sends: this replica's leasable proxies and caps. */
  fingerprint(): Fingerprint {
    return this.own.get();
  }

  /**
   * The classes a request with this selector and scope matches, with this replica's figures
   * of each; undefined when more than MAX_COUNTED_CLASSES do (it walks).
   */
  matchingClasses(
    selector: Readonly<Record<string, string>>,
    within: ((proxy: ProxyRecord) => boolean) | undefined,
  ): ClassFigures[] | undefined {
    const matched = this.classes.matching(selector, within);
    return matched?.map(({ data: { id } }) => {
      const { count, a, b } = this.own.ofClass(id);
      return { id, figures: `${count} ${a} ${b}`, exits: this.exitsIn.get(id) ?? 0 };
    });
  }

  /** A member's class (id) among those with an exit IP, or none. */
  private countExit(id: string, cls: string | undefined): void {
    const old = this.exitClassOf.get(id);
    if (old === cls) return;
    if (old !== undefined) {
      const n = this.exitsIn.get(old)! - 1;
      if (n === 0) this.exitsIn.delete(old);
      else this.exitsIn.set(old, n);
      this.exitClassOf.delete(id);
    }
    if (cls !== undefined) {
      this.exitsIn.set(cls, (this.exitsIn.get(cls) ?? 0) + 1);
      this.exitClassOf.set(id, cls);
    }
  }

  close(): void {
    this.closed = true;
  }

  /** Resolves once this replica's changes are in the book (tests wait for it). */
  async settled(): Promise<void> {
    while (this.flush !== undefined) await this.flush;
  }

  /**
   * The sweep's check: when the book's figures differ from this replica's with nothing on
   * its way (a write lost, another replica's catalog, a Redis that lost its keys), reads the
   * registry and sends what differs from this catalog. Two replicas whose catalogs differ
   * for longer than a sweep take turns: each walks while the other's view is the book's.
   */
  async reconcile(): Promise<void> {
    await this.settled();
    const own = this.own.get();
    const sum = (await this.deps.read('sum')) as (string | null)[];
    const book = { count: Number(sum[0] ?? 0), a: Number(sum[1] ?? 0), b: Number(sum[2] ?? 0) };
    if (sameFigures(book, own)) return;
    const flat = (await this.deps.read('all')) as string[];
    const theirs = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) theirs.set(flat[i], flat[i + 1]);
    for (const [id, entry] of theirs) if (entry !== this.entry(id)) this.pending.add(id);
    for (const id of this.own.ids()) if (!theirs.has(id)) this.pending.add(id);
    if (this.pending.size === 0) return;
    this.flush ??= this.sendPending();
    await this.settled();
  }

  /**
   * The registry entry this replica's catalog gives a proxy ('cap h1 h2 class', then ' x' and
   * its exit key when known, as the fleet script writes it; undefined: none).
   */
  private entry(id: string): string | undefined {
    const member = this.own.member(id);
    if (member === undefined) return undefined;
    let entry = `${member.cap} ${member.hash[0]} ${member.hash[1]}`;
    if (member.cls !== '') entry += ` ${member.cls}`;
    if (member.exit !== '') entry += ` x${member.exit}`;
    return entry;
  }

  private async sendPending(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.size > 0 && !this.closed) {
      const ids = [...this.pending];
      this.pending = new Set();
      for (let i = 0; i < ids.length; i += FLEET_CHUNK) {
        const chunk = ids.slice(i, i + FLEET_CHUNK);
        const args = [String(chunk.length)];
        for (const id of chunk) {
          const member = this.own.member(id);
          if (member === undefined) args.push(id, '0', '0', '0', '', '');
          else
            args.push(
              id,
              String(member.cap),
              String(member.hash[0]),
              String(member.hash[1]),
              member.cls,
              member.exit,
            );
        }
        try {
          await this.deps.send(args);
        } catch (err) {
          // The sweep's reconcile sends it again; meanwhile the acquire walks.
          this.deps.logger.warn({ err }, 'could not tell the shared book of the leasable proxies');
        }
      }
    }
    this.flush = undefined;
  }
}

function sameFigures(x: Fingerprint, y: Fingerprint): boolean {
  return x.count === y.count && x.a === y.a && x.b === y.b;
}

// The replica's side of the Redis book's wire format (redis-scripts.ts): what goes into a
// script's arguments and what comes out of its replies. Pure, so each rule has a table test.
import type { ProxyRecord } from './catalog.js';
import type { Fingerprint } from './fleet-fingerprint.js';
import type { ClassFigures } from './redis-fleet-feed.js';
import type { Lease, OutcomeCounts } from './lease-store.js';

/** Separates a lease value's fields; JSON, ids, addresses and targets never hold it. */
const SEP = '\u0000';

/**
 * A chunk in the order its candidates go to the acquire script: (latency, id), so a
 * candidate's place is its rank (the script's last tie-break).
 */
export function rankCandidates(chunk: readonly ProxyRecord[]): ProxyRecord[] {
  return [...chunk].sort(byLatencyThenID);
}

/**
 * What a refusal may be counted by (the acquire's 'whole'): the replica's fleet fingerprint
 * (a request every leasable proxy could take; with `block`, the keys of a request's exit-IP
 * block: exit-ip-match.ts's blockKeys), or the classes a request with a selector or a
 * scope matches with the replica's figures of each (redis-fleet-feed.ts).
 */
export type CountedBy =
  | { fleet: Fingerprint; block?: { first: string; last: string } }
  | { classes: readonly ClassFigures[]; block?: { first: string; last: string } };

/**
 * The acquire script's arguments (redis-scripts.ts's ACQUIRE): leaseID, ttlSeconds, the
 * lease key's life (ms), candidate count, per candidate (ranked) id, maxLeases, record JSON,
 * then target, selector JSON, session, its mode, the bound proxy known gone and the request
 * key (request-outcomes.ts), then (when given: a request the fleet's counts may refuse) the
 * replica's fleet fingerprint (fleet-fingerprint.ts) and, for an exit-IP block, two empty
 * fields and its first and last keys; or three empty fields, the ids of the
 * classes matched (comma-separated) and their union's figures (with a block, then its keys and
 * each class's count of members with an exit), the tail cut after the last one that is not its default ('',
 * '{}', '', 'none', '', ''): each argument costs
 * the client and Redis ~0.2 µs (~1k instructions of redis-server), so a lease without
 * target, selector or session sends none of them.
 */
export function acquireArgs(
  leaseID: string,
  ttlSeconds: string,
  lifeMillis: string,
  target: string,
  selector: string,
  ranked: readonly ProxyRecord[],
  json: (r: ProxyRecord) => string,
  session: string,
  mode: 'check' | 'moved' | 'none',
  gone: string,
  requestKey = '',
  counts?: CountedBy,
  leaseQuota = '',
): string[] {
  const args = [leaseID, ttlSeconds, lifeMillis, String(ranked.length), leaseQuota];
  for (const record of ranked) args.push(record.id, String(record.maxLeases), json(record));
  const tail = [target, selector, session, mode, gone, requestKey];
  const defaults = ['', '{}', '', 'none', '', ''];
  if (counts !== undefined && 'fleet' in counts && counts.fleet.count > 0) {
    const { fleet, block } = counts;
    tail.push(String(fleet.count), String(fleet.a), String(fleet.b));
    defaults.push('', '', '');
    if (block !== undefined) {
      tail.push('', '', block.first, block.last);
      defaults.push('', '', '', '');
    }
  } else if (counts !== undefined && 'classes' in counts && counts.classes.length > 0) {
    // Two arguments however many classes (up to MAX_COUNTED_CLASSES): their ids, and the
    // figures of their union (counts summed, sums XORed: a member's hashes cover its class,
    // so equal union figures mean equal members of each class, fleet-fingerprint.ts).
    tail.push('', '', '', counts.classes.map(({ id }) => id).join(','), unionFigures(counts.classes));
    // With an exit-IP block: its keys, and each class's members with an exit (the book's
    // by-class exit sets are checked against them).
    if (counts.block !== undefined)
      tail.push(counts.block.first, counts.block.last, counts.classes.map(({ exits }) => exits).join(','));
    while (defaults.length < tail.length) defaults.push('');
  }
  let last = tail.length;
  while (last > 0 && tail[last - 1] === defaults[last - 1]) last--;
  for (let i = 0; i < last; i++) args.push(tail[i]);
  return args;
}

/** The figures ("count a b") of the union of classes given theirs. */
export function unionFigures(classes: readonly ClassFigures[]): string {
  let count = 0;
  let a = 0;
  let b = 0;
  for (const { figures } of classes) {
    const [n, x, y] = figures.split(' ').map(Number);
    count += n;
    a ^= x;
    b ^= y;
  }
  return `${count} ${a} ${b}`;
}

function byLatencyThenID(a: ProxyRecord, b: ProxyRecord): number {
  if (a.latencyMillis !== b.latencyMillis) return a.latencyMillis - b.latencyMillis;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/**
 * A lease value (proxy, addr, ttl, at, exp, target, sel, rec, session) as a Lease. The
 * session is the last field and may hold anything, the separator included.
 */
export function decodeLease(id: string, value: string): Lease {
  const f = value.split(SEP);
  const [proxyID, , ttl, at, exp, target, sel, rec] = f;
  const session = f.slice(8).join(SEP);
  return {
    id,
    proxyID,
    proxy: JSON.parse(rec) as ProxyRecord,
    selector: JSON.parse(sel) as Record<string, string>,
    ...(target === '' ? {} : { target }),
    ...(session === '' ? {} : { session }),
    ttlSeconds: Number(ttl),
    acquiredAt: new Date(Number(at)),
    expiresAt: new Date(Number(exp)),
  };
}

/** (proxy id, load) pairs the script saw, for the replica's ranking hints. */
export type LoadHints = [proxyID: string, load: number][];

/** The acquire script's answer (redis-scripts.ts's ACQUIRE), decoded. */
export type AcquireReply =
  | {
      kind: 'ok';
      proxyID: string;
      /** The chosen candidate's record, as sent. */
      proxy: ProxyRecord;
      now: number;
      expiresAt: number;
      moved: boolean;
      load: number;
      /** The proxy's raw statistics slots. */
      slots: string[];
      hints: LoadHints;
    }
  | { kind: 'need'; proxyID: string }
  /** The owner holds its lease quota of live leases (`held` of them): nothing was leased. */
  | { kind: 'quota'; held: number }
  /** The request id was granted before: that lease's id and stored value (decodeLease). */
  | { kind: 'dup'; leaseID: string; value: string }
  | {
      kind: 'none';
      leasable: number;
      cooling: number;
      moved: boolean;
      waitMs: number;
      hints: LoadHints;
      /** The counts are the whole fleet's (the registry's): nothing left to walk. */
      whole: boolean;
    };

/**
 * Reads the acquire script's one-string answer (fields separated by \0). `ranked`: the
 * candidates as sent (acquireArgs's order). Its hints field lists "i:load" (1-based) for the
 * candidates with leases and "i:h" for those a hold keeps out: every other candidate is idle
 * (a hint of 0), a held one has no hint.
 */
export function decodeAcquireReply(reply: string, ranked: readonly ProxyRecord[]): AcquireReply {
  const f = reply.split(SEP);
  const hints = (field: string | undefined): LoadHints => {
    const loads: (number | undefined)[] = ranked.map(() => 0);
    if (field !== undefined && field !== '') {
      for (const hint of field.split(',')) {
        const at = hint.indexOf(':');
        const value = hint.slice(at + 1);
        loads[Number(hint.slice(0, at)) - 1] = value === 'h' ? undefined : Number(value);
      }
    }
    const out: LoadHints = [];
    loads.forEach((load, i) => {
      if (load !== undefined) out.push([ranked[i].id, load]);
    });
    return out;
  };
  switch (f[0]) {
    case 'ok': {
      const proxy = ranked.find((r) => r.id === f[1]);
      if (proxy === undefined) throw new Error(`acquire chose ${JSON.stringify(f[1])}, which was not sent`);
      return {
        kind: 'ok',
        proxyID: f[1],
        proxy,
        now: Number(f[2]),
        expiresAt: Number(f[3]),
        moved: f[4] === '1',
        load: Number(f[5]),
        slots: f.slice(7),
        hints: hints(f[6]),
      };
    }
    case 'need':
      return { kind: 'need', proxyID: f[1] };
    case 'quota':
      return { kind: 'quota', held: Number(f[1]) };
    case 'dup':
      return { kind: 'dup', leaseID: f[1], value: f.slice(2).join(SEP) };
    case 'none':
      return {
        kind: 'none',
        leasable: Number(f[1]),
        cooling: Number(f[2]),
        moved: f[3] === '1',
        waitMs: Number(f[4]),
        hints: hints(f[5]),
        whole: f[6] === '1',
      };
    default:
      throw new Error(`unexpected acquire reply ${JSON.stringify(reply.slice(0, 40))}`);
  }
}

/**
 * The release script's answer: the lease's proxy and its leases now (-1: the lease had ended
 * and is not counted there any more), or undefined when the lease was unknown.
 */
export function decodeReleaseReply(reply: string | null): { proxyID: string; load: number } | undefined {
  if (reply === null) return undefined;
  const at = reply.lastIndexOf(SEP);
  return { proxyID: reply.slice(0, at), load: Number(reply.slice(at + 1)) };
}

/** One report of the report script's answer (redis-scripts.ts's REPORT), decoded. */
export interface ReportReply {
  /** The stored lease value (decodeLease). */
  value: string;
  target: string;
  /** The cooldown's end; -1 none, -2 not recorded at a cap. */
  until: number;
  /**
   * The report started the cooldown ('+' before its end: a replica of before reads the end
   * alike, and a reply stored by one, replayed, just says nothing started).
   */
  started: boolean;
  /** unreachable only (-1 otherwise): 1 suspect now, 0 the report was not believed. */
  suspect: number;
  /** unreachable only (-1 otherwise): 1 when the report asked for a probe. */
  probe: number;
  /** -1 no release asked; 1 the release ended the lease, 0 it had ended. */
  released: number;
}

/**
 * The report script's answer: per report "target\0until\0suspect\0probe\0released\0value"
 * (the value last: its session may hold the separator), or '' when the lease is gone.
 */
export function decodeReportReply(items: readonly string[]): (ReportReply | undefined)[] {
  return items.map((item) => {
    if (item === '') return undefined;
    const f = item.split(SEP);
    return {
      target: f[0],
      until: Number(f[1]),
      started: f[1].startsWith('+'),
      suspect: Number(f[2]),
      probe: Number(f[3]),
      released: Number(f[4]),
      value: f.slice(5).join(SEP),
    };
  });
}

/**
 * Report counts from a proxy's statistics slots ("bucket ok banned rate_limited
 * unreachable"), counting only the buckets from `oldestBucket` on (the window).
 */
export function windowCounts(slots: readonly string[], oldestBucket: number): OutcomeCounts {
  const counts = [0, 0, 0, 0];
  for (const slot of slots) {
    const [bucket, ...rest] = slot.split(' ').map(Number);
    if (bucket >= oldestBucket) rest.forEach((n, j) => (counts[j] += n));
  }
  return { ok: counts[0], banned: counts[1], rate_limited: counts[2], unreachable: counts[3] };
}

/** The first bucket inside the window at `now` (outcome-window.ts's ring of `buckets`). */
export function oldestBucket(now: number, bucketMillis: number, buckets: number): number {
  return Math.floor(now / bucketMillis) - buckets + 1;
}

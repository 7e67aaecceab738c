// The JSON shapes of proxies and leases on the wire.
import type { ProxyRecord } from '../book/catalog.js';
import type { HoldReason, Lease, OutcomeStats, ProxyUsage, SessionOutcome } from '../book/lease-store.js';
import { PageBuffers } from './page-buffers.js';

export interface ProxyView {
  id: string;
  ip: string;
  port: number;
  attributes: Readonly<Record<string, string>>;
  phase: string;
  healthy: boolean;
  latencyMillis: number;
  /** The egress address target sites see; absent until the operator has read it (spec.healthCheck.exitIPURL). */
  exitIP?: string;
  activeLeases: number;
  maxLeases: number;
  stats: OutcomeStats;
  /** Present while the lease book holds the proxy out of every lease (see ProxyUsage.held). */
  held?: HoldReason;
}

export interface LeasedProxyView extends ProxyView {
  /**
   * Ready to hand to an HTTP client as its proxy, e.g. http://203.0.113.7:3128, or with the
   * credentials the proxy requires as userinfo: http://user:pass@203.0.113.7:3128.
   */
  url: string;
  /** The same credentials as separate fields, for clients that take them apart from the URL. */
  username?: string;
  password?: string;
}

export interface LeaseView {
  leaseID: string;
  proxy: LeasedProxyView;
  expiresAt: string;
  target: string | null;
  session?: SessionOutcome;
}

export function toProxyView(proxy: ProxyRecord, usage: ProxyUsage): ProxyView {
  const { id, ip, port, attributes, phase, healthy, latencyMillis, exitIP, maxLeases } = proxy;
  return {
    id,
    ip,
    port,
    attributes,
    phase,
    healthy,
    latencyMillis,
    ...(exitIP === undefined ? {} : { exitIP }),
    activeLeases: usage.activeLeases,
    maxLeases,
    stats: usage.stats,
    ...(usage.held === undefined ? {} : { held: usage.held }),
  };
}

export function toLeaseView(
  lease: Lease,
  proxy: ProxyRecord,
  usage: ProxyUsage,
  session?: SessionOutcome,
): LeaseView {
  const view: LeaseView = {
    leaseID: lease.id,
    proxy: {
      ...toProxyView(proxy, usage),
      url: proxyURL(proxy.ip, proxy.port, proxy.credentials),
      ...(proxy.credentials ?? {}),
    },
    expiresAt: lease.expiresAt.toISOString(),
    target: lease.target ?? null,
  };
  if (session !== undefined) view.session = session;
  return view;
}

export function proxyURL(
  ip: string,
  port: number,
  credentials?: { readonly username: string; readonly password: string },
): string {
  const userinfo = credentials
    ? `${encodeURIComponent(credentials.username)}:${encodeURIComponent(credentials.password)}@`
    : '';
  return `http://${userinfo}${ip.includes(':') ? `[${ip}]` : ip}:${port}`;
}

const OPEN = Buffer.from('{"items":[');
const COMMA = 0x2c;

/**
 * Serializes `{items: [...]}` from per-record fragments: the static part of each record is
 * serialized once per record (records are immutable and replaced on change), only the live
 * lease count and statistics are appended per answer, and the whole item of an idle proxy (no
 * leases, no reports: most of a large fleet) is kept as ready bytes. A page is written in
 * one pass into a buffer of its exact size from a pool (page-buffers.ts): no array of parts,
 * no copy into a fresh buffer; the caller gives the buffer back with `release` once the
 * response no longer reads it.
 */
export class ProxyListSerializer {
  private readonly fragments = new WeakMap<ProxyRecord, string>();
  private readonly idleItems = new WeakMap<ProxyRecord, { windowSeconds: number; bytes: Buffer }>();
  /** The items of the page being written (ready bytes, or a busy item's text); emptied after. */
  private readonly parts: (Buffer | string)[] = [];

  constructor(private readonly buffers = new PageBuffers()) {}

  /**
   * The list answer as UTF-8 bytes; `usage[i]` is `proxies[i]`'s. `continueToken` when another
   * page follows. Give the result back with `release` when it has been written.
   */
  list(proxies: readonly ProxyRecord[], usage: readonly ProxyUsage[], continueToken?: string): Buffer {
    if (usage.length !== proxies.length) {
      throw new Error(`usage for ${usage.length} proxies, expected ${proxies.length}`);
    }
    const parts = this.parts;
    const tail = continueToken === undefined ? ']}' : `],"continue":${JSON.stringify(continueToken)}}`;
    let length = OPEN.length + Math.max(0, proxies.length - 1) + Buffer.byteLength(tail);
    for (let i = 0; i < proxies.length; i++) {
      const part = this.itemPart(proxies[i], usage[i]);
      parts.push(part);
      length += typeof part === 'string' ? Buffer.byteLength(part) : part.length;
    }
    const out = this.buffers.take(length);
    out.set(OPEN, 0);
    let at = OPEN.length;
    for (let i = 0; i < parts.length; i++) {
      if (i > 0) out[at++] = COMMA;
      const part = parts[i];
      if (typeof part === 'string') {
        at += out.write(part, at);
      } else {
        out.set(part, at);
        at += part.length;
      }
    }
    parts.length = 0;
    at += out.write(tail, at);
    if (at !== length) throw new Error(`list page of ${length} bytes written as ${at}`);
    return out;
  }

  /** Gives back a page `list` returned, once nothing reads it any more (its response closed). */
  release(page: Uint8Array): void {
    this.buffers.give(page);
  }

  item(proxy: ProxyRecord, usage: ProxyUsage): string {
    let fragment = this.fragments.get(proxy);
    if (fragment === undefined) {
      const { id, ip, port, attributes, phase, healthy, latencyMillis, exitIP, maxLeases } = proxy;
      // The object without its closing brace; the live fields follow. An undefined exitIP is left out.
      fragment = JSON.stringify({
        id,
        ip,
        port,
        attributes,
        phase,
        healthy,
        latencyMillis,
        exitIP,
        maxLeases,
      }).slice(0, -1);
      this.fragments.set(proxy, fragment);
    }
    const { windowSeconds, ok, banned, rate_limited, unreachable } = usage.stats;
    const held = usage.held === undefined ? '' : `,"held":"${usage.held}"`;
    return `${fragment},"activeLeases":${usage.activeLeases},"stats":{"windowSeconds":${windowSeconds},"ok":${ok},"banned":${banned},"rate_limited":${rate_limited},"unreachable":${unreachable}}${held}}`;
  }

  /** An idle item's ready bytes, or a busy item's text (written straight into the page). */
  private itemPart(proxy: ProxyRecord, usage: ProxyUsage): Buffer | string {
    const { windowSeconds, ok, banned, rate_limited, unreachable } = usage.stats;
    const busy = usage.activeLeases !== 0 || usage.held !== undefined;
    if (busy || ok !== 0 || banned !== 0 || rate_limited !== 0 || unreachable !== 0) {
      return this.item(proxy, usage);
    }
    const cached = this.idleItems.get(proxy);
    if (cached !== undefined && cached.windowSeconds === windowSeconds) return cached.bytes;
    const bytes = Buffer.from(this.item(proxy, usage));
    this.idleItems.set(proxy, { windowSeconds, bytes });
    return bytes;
  }
}

// The JSON shapes of proxies and leases on the wire.
import type { ProxyRecord } from './catalog.js';
import type { HoldReason, Lease, OutcomeStats, ProxyUsage, SessionOutcome } from './lease-store.js';

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
const COMMA = Buffer.from(',');
const CLOSE = Buffer.from(']}');

/**
 * Serializes `{items: [...]}` from per-record fragments: the static part of each record is
 * serialized once per record (records are immutable and replaced on change), only the live
 * lease count and statistics are appended per answer, and the whole item of an idle proxy (no
 * leases, no reports: most of a large fleet) is kept as ready bytes.
 */
export class ProxyListSerializer {
  private readonly fragments = new WeakMap<ProxyRecord, string>();
  private readonly idleItems = new WeakMap<ProxyRecord, { windowSeconds: number; bytes: Buffer }>();

  /** The list answer as UTF-8 bytes; `continueToken` when another page follows. */
  list(
    proxies: readonly ProxyRecord[],
    usage: ReadonlyMap<string, ProxyUsage>,
    continueToken?: string,
  ): Buffer {
    const parts: Buffer[] = [OPEN];
    for (let i = 0; i < proxies.length; i++) {
      if (i > 0) parts.push(COMMA);
      parts.push(this.itemBytes(proxies[i], usage.get(proxies[i].id)!));
    }
    parts.push(
      continueToken === undefined ? CLOSE : Buffer.from(`],"continue":${JSON.stringify(continueToken)}}`),
    );
    return Buffer.concat(parts);
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

  private itemBytes(proxy: ProxyRecord, usage: ProxyUsage): Buffer {
    const { windowSeconds, ok, banned, rate_limited, unreachable } = usage.stats;
    const busy = usage.activeLeases !== 0 || usage.held !== undefined;
    if (busy || ok !== 0 || banned !== 0 || rate_limited !== 0 || unreachable !== 0) {
      return Buffer.from(this.item(proxy, usage));
    }
    const cached = this.idleItems.get(proxy);
    if (cached !== undefined && cached.windowSeconds === windowSeconds) return cached.bytes;
    const bytes = Buffer.from(this.item(proxy, usage));
    this.idleItems.set(proxy, { windowSeconds, bytes });
    return bytes;
  }
}

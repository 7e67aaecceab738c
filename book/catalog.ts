// What the lease book reads proxies from. The book owns this interface; the handlers layer
// feeds an IndexedCatalog from the informer cache's change events, tests fill one by hand.
// Nothing here knows about Kubernetes.
import type { ExitIPTerm } from './exit-ip-match.js';

/** One proxy as the book (and the discovery API) sees it: a flattened, read-only view of a Proxy resource. */
export interface ProxyRecord {
  /** namespace/name: stable across replacements, unlike the IP. */
  readonly id: string;
  /** Empty until the proxy has an address; such a proxy is listed but never leased. */
  readonly ip: string;
  readonly port: number;
  readonly attributes: Readonly<Record<string, string>>;
  readonly phase: string;
  readonly healthy: boolean;
  readonly latencyMillis: number;
  /** Concurrent lease cap; 0 means list-only, never leased. */
  readonly maxLeases: number;
  /**
   * Why the health verdict is unhealthy (the Healthy condition's reason), when it is and one
   * is known: what GET /v1/proxies/{namespace}/{name} tells a person (leasability.ts).
   */
  readonly healthReason?: string;
  /**
   * Being drained before its instance is replaced (rotation): no new leases nor session
   * bindings; its live leases run to their end.
   */
  readonly draining?: boolean;
  /** The egress address target sites see, when the operator reads it (spec.healthCheck.exitIPURL). */
  readonly exitIP?: string;
  /** Basic-auth credentials the proxy requires; handed out with a lease only, never listed. */
  readonly credentials?: { readonly username: string; readonly password: string };
  /**
   * An External proxy: whoever connects to it (probes, the gateway) checks its address against
   * the providers config's endpoint rule first (issue 44 item 5).
   */
  readonly guarded?: boolean;
}

/** Where a proxy listens, ip:port: the address a hold, a report or a health observation is about. */
export function addressOf(record: Pick<ProxyRecord, 'ip' | 'port'>): string {
  return `${record.ip}:${record.port}`;
}

/** One record appearing, changing or disappearing; records are immutable and replaced whole. */
export interface CatalogChange {
  before?: ProxyRecord;
  after?: ProxyRecord;
}

export type CatalogListener = (change: CatalogChange) => void;

/** Which records a list answer holds. */
export interface CatalogFilter {
  /** Attribute equality: every pair must be present; empty or absent matches all. */
  selector?: Readonly<Record<string, string>>;
  /** Only healthy (true) or only unhealthy (false) records; absent = both. */
  healthy?: boolean;
  /** Only records whose exit IP is this address or in this block (unknown: never), as a lease's term. */
  exitIP?: ExitIPTerm;
}

export interface ProxyCatalog {
  /** Changes whenever any record changes; an equal version means identical content. */
  version(): number;
  get(id: string): ProxyRecord | undefined;
  /**
   * The records the filter keeps, sorted by id. Served through the attribute index and
   * cached per version, so it is cheap to call on every request.
   */
  list(filter?: CatalogFilter): readonly ProxyRecord[];
  /** Every record, in no particular order (for building indexes). */
  records(): Iterable<ProxyRecord>;
  /** Calls `listener` synchronously after every change; returns the unsubscribe function. */
  subscribe(listener: CatalogListener): () => void;
}

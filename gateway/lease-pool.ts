// The leases the gateway holds for its clients. One lease carries one request or tunnel at a
// time, so a proxy's maxLeases caps the requests and tunnels in flight through it (with the
// API's leases, across every replica). A finished lease waits idle for the next request with
// the same options (owner, session, selector, target) and is released after the idle time;
// every held lease is renewed at a third of its TTL, so a lease outlives no gateway by more
// than its TTL.
import type { GatewayBook, GatewayLeaseRequest, GatewayNoLease, Upstream } from './ports.js';

export interface HeldLease {
  readonly leaseID: string;
  readonly upstream: Upstream;
  readonly key: string;
  readonly request: GatewayLeaseRequest;
  renewedAt: number;
  idleSince: number;
  inUse: boolean;
  /** The book no longer knows it (a renewal failed): never pooled again. */
  lost: boolean;
  /** Reported by session: released as soon as its request or tunnel ends. */
  retired: boolean;
}

export type TakeResult =
  { granted: true; lease: HeldLease } | { granted: false; reason: GatewayNoLease; retryAfterMs?: number };

export interface LeasePoolOptions {
  /** Milliseconds a finished lease is kept for reuse before it is released. */
  idleMs: number;
  now?: () => number;
  /** Called with each failure of a background renew or release (logged by the owner). */
  onError?: (error: unknown, what: 'renew' | 'release') => void;
}

export function poolKey(r: GatewayLeaseRequest): string {
  const selector = Object.keys(r.selector)
    .sort()
    .map((k) => `${k}=${r.selector[k]}`)
    .join('&');
  return `${r.owner}\n${r.session ?? ''}\n${selector}\n${r.target}\n${r.ttlSeconds}`;
}

export class LeasePool {
  private readonly idle = new Map<string, HeldLease[]>();
  private readonly held = new Set<HeldLease>();
  private readonly now: () => number;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly book: GatewayBook,
    private readonly options: LeasePoolOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** Leases held now (in use and idle). */
  get size(): number {
    return this.held.size;
  }

  get inUse(): number {
    let n = 0;
    for (const h of this.held) if (h.inUse) n++;
    return n;
  }

  /** An idle lease of the same options, or a new one from the book. */
  async take(request: GatewayLeaseRequest): Promise<TakeResult> {
    const key = poolKey(request);
    const waiting = this.idle.get(key);
    const reused = waiting?.pop();
    if (waiting !== undefined && waiting.length === 0) this.idle.delete(key);
    if (reused !== undefined) {
      reused.inUse = true;
      return { granted: true, lease: reused };
    }
    const result = await this.book.lease(request);
    if (!result.granted) return result;
    // The session moved (its proxy is banned here, suspect or gone): its idle leases on the
    // old proxy must not carry it any more.
    if (result.sessionMoved) this.releaseIdle(key);
    const now = this.now();
    const lease: HeldLease = {
      leaseID: result.leaseID,
      upstream: result.upstream,
      key,
      request,
      renewedAt: now,
      idleSince: now,
      inUse: true,
      lost: false,
      retired: false,
    };
    this.held.add(lease);
    return { granted: true, lease };
  }

  /** The request or tunnel is over and the proxy served it: keep the lease for the next one. */
  give(lease: HeldLease): void {
    if (!this.held.has(lease)) return;
    if (lease.lost) {
      this.held.delete(lease);
      return;
    }
    if (lease.retired) {
      this.releaseQuietly(lease);
      return;
    }
    lease.inUse = false;
    lease.idleSince = this.now();
    const list = this.idle.get(lease.key);
    if (list === undefined) this.idle.set(lease.key, [lease]);
    else list.push(lease);
  }

  /** The lease's proxy failed it (or was reported): release it now, never reuse it. */
  async drop(lease: HeldLease): Promise<void> {
    this.forget(lease);
    await this.book.release(lease.leaseID, lease.request.owner);
  }

  /** Held leases (in use or idle) of one owner's session key: what a report by session applies to. */
  heldFor(owner: string, session: string): HeldLease[] {
    return [...this.held].filter(
      (h) => h.request.owner === owner && h.request.session === session && !h.lost && !h.retired,
    );
  }

  /** Never reused: released now if idle, else when its request or tunnel ends. */
  retire(lease: HeldLease): void {
    if (!lease.inUse) this.releaseQuietly(lease);
    else lease.retired = true;
  }

  /** Releases the idle leases of one key (in the background). */
  releaseIdle(key: string): void {
    const list = this.idle.get(key);
    if (list === undefined) return;
    this.idle.delete(key);
    for (const lease of list) this.releaseQuietly(lease);
  }

  /** Renews what is due and releases what has been idle too long; returns when done. */
  async sweep(): Promise<void> {
    const now = this.now();
    const work: Promise<void>[] = [];
    for (const lease of [...this.held]) {
      if (!lease.inUse && now - lease.idleSince >= this.options.idleMs) {
        this.releaseQuietly(lease);
        continue;
      }
      if (now - lease.renewedAt < (lease.request.ttlSeconds * 1000) / 3) continue;
      lease.renewedAt = now;
      work.push(
        this.book.renew(lease.leaseID, lease.request.ttlSeconds, lease.request.owner).then(
          (alive) => {
            if (alive) return;
            lease.lost = true;
            if (!lease.inUse) this.forget(lease);
          },
          (err: unknown) => this.options.onError?.(err, 'renew'),
        ),
      );
    }
    await Promise.all(work);
  }

  /** Sweeps every `intervalMs` until close(). */
  start(intervalMs = 1000): void {
    this.timer ??= setInterval(() => void this.sweep(), intervalMs);
    this.timer.unref();
  }

  /** Stops sweeping and releases every held lease (in use ones too: the process is going). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    const all = [...this.held];
    for (const lease of all) this.forget(lease);
    await Promise.all(
      all.map((l) =>
        this.book
          .release(l.leaseID, l.request.owner)
          .catch((err: unknown) => this.options.onError?.(err, 'release')),
      ),
    );
  }

  private releaseQuietly(lease: HeldLease): void {
    this.forget(lease);
    this.book
      .release(lease.leaseID, lease.request.owner)
      .catch((err: unknown) => this.options.onError?.(err, 'release'));
  }

  private forget(lease: HeldLease): void {
    this.held.delete(lease);
    const list = this.idle.get(lease.key);
    if (list === undefined) return;
    const i = list.indexOf(lease);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idle.delete(lease.key);
  }
}

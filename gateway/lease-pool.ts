// The leases the gateway holds for its clients. While the fleet has room, one lease carries
// one request or tunnel at a time, so a proxy's maxLeases caps the requests and tunnels in
// flight through it (with the API's leases, across every replica). A finished lease waits idle
// for the next request with the same options (owner, session, selector, target) and is
// released after the idle time; every held lease is renewed at a third of its TTL, so a lease
// outlives no gateway by more than its TTL.
//
// When the book answers all_busy (every proxy at its maxLeases), the request shares a lease
// this gateway already holds for the same owner, selector, target and TTL, least-loaded by
// requests in flight, instead of failing: Crawlee's default pool makes up to 1,000 sessions,
// far more than a fleet's slots (the Crawlee client shares leases across sessions the same
// way, client/src/crawlee/lease-acquisition.ts). A session that joined a lease stays on it
// while the lease is held (the lease is its binding: the book bound no proxy to it); sharing
// adds no lease, so the book's maxLeases still holds. A shared lease is released when none of
// its requests ran for the idle time, or at once when its proxy is banned for its target,
// failed or was reported: each of its sessions is then placed afresh.
import type { GatewayBook, GatewayLeaseRequest, GatewayNoLease, Upstream } from './ports.js';

export interface HeldLease {
  readonly leaseID: string;
  readonly upstream: Upstream;
  /** The options it was granted for (its session is the one the book bound to its proxy). */
  readonly request: GatewayLeaseRequest;
  /** Owner, selector, target and TTL: the requests that may share it when the fleet is full. */
  readonly group: string;
  /**
   * The book session keys riding it: the one it was granted for, and those that joined it (a
   * joined session idle for the idle time is let go: Crawlee's sessions come and go).
   */
  readonly sessions: Map<string, SessionUse>;
  /** Requests and tunnels it carries now. */
  inFlight: number;
  renewedAt: number;
  /** When its last request or tunnel ended (idle while inFlight is 0). */
  idleSince: number;
  /** The book no longer knows it (a renewal failed): never pooled again. */
  lost: boolean;
  /** Reported (by session, or its proxy banned for the target): released once its requests end. */
  retired: boolean;
}

export interface SessionUse {
  inFlight: number;
  idleSince: number;
}

export type TakeResult =
  | { granted: true; lease: HeldLease; shared?: true }
  | { granted: false; reason: GatewayNoLease; retryAfterMs?: number };

export interface LeasePoolOptions {
  /** Milliseconds a finished lease is kept for reuse before it is released. */
  idleMs: number;
  now?: () => number;
  /** Called with each failure of a background renew or release (logged by the owner). */
  onError?: (error: unknown, what: 'renew' | 'release') => void;
}

/** The options a lease may be shared across (everything but the session). */
export function groupKey(r: GatewayLeaseRequest): string {
  const selector = Object.keys(r.selector)
    .sort()
    .map((k) => `${k}=${r.selector[k]}`)
    .join('&');
  return `${r.owner}\n${selector}\n${r.target}\n${r.ttlSeconds}`;
}

/** Which of `leases` a request joins: fewest requests in flight, then fewest sessions. Pure. */
export function leastLoaded(leases: Iterable<HeldLease>): HeldLease | undefined {
  let best: HeldLease | undefined;
  for (const l of leases) {
    if (l.lost || l.retired) continue;
    if (
      best === undefined ||
      l.inFlight < best.inFlight ||
      (l.inFlight === best.inFlight && l.sessions.size < best.sessions.size)
    )
      best = l;
  }
  return best;
}

export class LeasePool {
  private readonly held = new Set<HeldLease>();
  /** group → its held leases. */
  private readonly groups = new Map<string, Set<HeldLease>>();
  /** group + session ('' for none) → the leases it rides (for no session: those granted without one). */
  private readonly riding = new Map<string, Set<HeldLease>>();
  /** group → the book's answers on their way (a grant counts in the book before it is held here). */
  private readonly asking = new Map<string, Set<Promise<unknown>>>();
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
    for (const h of this.held) if (h.inFlight > 0) n++;
    return n;
  }

  /**
   * An idle lease of the same options; for a session that joined a shared lease, that lease;
   * else a new one from the book; when the book is full, a held lease of the same group.
   */
  async take(
    request: GatewayLeaseRequest,
    room: (upstreamID: string) => boolean = always,
  ): Promise<TakeResult> {
    const group = groupKey(request);
    const slot = slotKey(group, request.session);
    const own = this.riding.get(slot);
    /** An idle lease of these options whose upstream must wait for its turn at the site (site-paces.ts). */
    let waiting: HeldLease | undefined;
    if (own !== undefined) {
      for (const l of own) {
        if (l.inFlight > 0 || l.lost || l.retired) continue;
        if (room(l.upstream.id)) return this.use(l, request.session);
        waiting ??= l;
      }
      // A session's own lease is its binding (its exit IP): it waits there for its turn.
      if (waiting !== undefined && request.session !== undefined) return this.use(waiting, request.session);
      // Joined, not granted: the book bound no proxy to this session, so asking it would move it.
      if (request.session !== undefined) {
        const joined = leastLoaded([...own].filter((l) => l.request.session !== request.session));
        if (joined !== undefined) return this.use(joined, request.session);
      }
    }
    // Without a session, a new lease may be on an upstream whose turn comes sooner.
    const asked = this.book.lease(request);
    addTo(this.asking, group, asked);
    let result: Awaited<typeof asked>;
    try {
      result = await asked;
    } finally {
      removeFrom(this.asking, group, asked);
    }
    if (!result.granted) {
      if (waiting !== undefined) return this.use(waiting, request.session);
      // At its lease quota the token rides its own held leases as when the fleet is full.
      if (result.reason !== 'all_busy' && result.reason !== 'lease_quota') return result;
      const pick = () =>
        leastLoaded(this.riding.get(slot) ?? []) ?? leastLoaded(this.groups.get(group) ?? []);
      let shared = pick();
      // The book may be full of this group's own grants whose answers are still on their way
      // (a loaded event loop, a slow Redis): wait for them and share, rather than a 503.
      for (let pending = this.asking.get(group); shared === undefined && pending !== undefined;) {
        await Promise.allSettled(pending);
        shared = pick();
        pending = this.asking.get(group);
      }
      if (shared === undefined) return result;
      if (request.session !== undefined) this.ride(shared, slotKey(group, request.session), request.session);
      return { ...this.use(shared, request.session), shared: true };
    }
    // The session moved (its proxy is banned here, suspect, gone, or only full): no lease on
    // the old proxy carries it any more. Sessions that joined those leases stay (a full proxy
    // is no reason to move them; a ban moves them by retireProxy or on their own 403).
    if (result.sessionMoved && request.session !== undefined)
      this.unbind(slot, request.session, result.upstream.id);
    const now = this.now();
    const lease: HeldLease = {
      leaseID: result.leaseID,
      upstream: result.upstream,
      request,
      group,
      sessions: new Map(
        request.session === undefined ? [] : [[request.session, { inFlight: 1, idleSince: now }]],
      ),
      inFlight: 1,
      renewedAt: now,
      idleSince: now,
      lost: false,
      retired: false,
    };
    this.held.add(lease);
    addTo(this.groups, group, lease);
    addTo(this.riding, slot, lease);
    return { granted: true, lease };
  }

  /**
   * The request or tunnel (of `session`, the book's key, as taken) is over and the proxy served
   * it: keep the lease for the next one.
   */
  give(lease: HeldLease, session: string | undefined): void {
    if (!this.held.has(lease)) return;
    const now = this.now();
    lease.inFlight = Math.max(0, lease.inFlight - 1);
    lease.idleSince = now;
    const use = session === undefined ? undefined : lease.sessions.get(session);
    if (use !== undefined) {
      use.inFlight = Math.max(0, use.inFlight - 1);
      use.idleSince = now;
    }
    if (lease.inFlight > 0) return;
    if (lease.lost) this.forget(lease);
    else if (lease.retired || this.orphaned(lease)) this.releaseQuietly(lease);
  }

  /** The lease's proxy failed it (or was reported): release it now, never reuse it. */
  async drop(lease: HeldLease): Promise<void> {
    if (!this.held.has(lease)) return;
    this.forget(lease);
    await this.book.release(lease.leaseID, lease.request.owner);
  }

  /** Held leases (in use or idle) one owner's session key rides: what a report by session applies to. */
  heldFor(owner: string, session: string): HeldLease[] {
    return [...this.held].filter(
      (h) => h.request.owner === owner && h.sessions.has(session) && !h.lost && !h.retired,
    );
  }

  /** Never reused: released now if idle, else when its requests and tunnels end. */
  retire(lease: HeldLease): void {
    if (!this.held.has(lease)) return;
    if (lease.inFlight === 0) this.releaseQuietly(lease);
    else lease.retired = true;
  }

  /**
   * A proxy was reported banned or rate-limited for a target: every lease held on it for that
   * target is retired, whichever session rides it, so none of them goes there again.
   */
  retireProxy(proxyID: string, target: string): void {
    for (const l of [...this.held])
      if (l.upstream.id === proxyID && l.request.target === target) this.retire(l);
  }

  /** Renews what is due and releases what has been idle too long; returns when done. */
  async sweep(): Promise<void> {
    const now = this.now();
    const work: Promise<void>[] = [];
    for (const lease of [...this.held]) {
      if (this.idleTooLong(lease)) {
        this.releaseQuietly(lease);
        continue;
      }
      this.letGoIdleSessions(lease, now);
      if (now - lease.renewedAt < (lease.request.ttlSeconds * 1000) / 3) continue;
      lease.renewedAt = now;
      work.push(
        this.book.renew(lease.leaseID, lease.request.ttlSeconds, lease.request.owner).then(
          (alive) => {
            if (alive) return;
            lease.lost = true;
            if (lease.inFlight === 0) this.forget(lease);
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

  private idleTooLong(lease: HeldLease): boolean {
    return lease.inFlight === 0 && this.now() - lease.idleSince >= this.options.idleMs;
  }

  private use(lease: HeldLease, session: string | undefined): { granted: true; lease: HeldLease } {
    lease.inFlight++;
    const use = session === undefined ? undefined : lease.sessions.get(session);
    if (use !== undefined) use.inFlight++;
    return { granted: true, lease };
  }

  private ride(lease: HeldLease, slot: string, session: string): void {
    if (lease.sessions.has(session)) return;
    lease.sessions.set(session, { inFlight: 0, idleSince: this.now() });
    addTo(this.riding, slot, lease);
  }

  /**
   * Joined sessions that used the lease for none of the idle time are let go (their next
   * request is placed afresh), so a lease carrying a long crawl does not collect every session
   * the crawler ever made. The session it was granted for stays: the book bound it there.
   */
  private letGoIdleSessions(lease: HeldLease, now: number): void {
    for (const [session, use] of lease.sessions) {
      if (session === lease.request.session || use.inFlight > 0) continue;
      if (now - use.idleSince < this.options.idleMs) continue;
      lease.sessions.delete(session);
      removeFrom(this.riding, slotKey(lease.group, session), lease);
    }
  }

  /** The session leaves its leases on any proxy but `keep` (the book moved it); one left to nobody goes. */
  private unbind(slot: string, session: string, keep: string): void {
    for (const l of [...(this.riding.get(slot) ?? [])]) {
      if (l.upstream.id === keep) continue;
      l.sessions.delete(session);
      removeFrom(this.riding, slot, l);
      if (l.inFlight === 0 && this.orphaned(l)) this.releaseQuietly(l);
    }
  }

  /** Granted for a session that has left it, and joined by none: no request will ask for it. */
  private orphaned(lease: HeldLease): boolean {
    return lease.request.session !== undefined && lease.sessions.size === 0;
  }

  private releaseQuietly(lease: HeldLease): void {
    this.forget(lease);
    this.book
      .release(lease.leaseID, lease.request.owner)
      .catch((err: unknown) => this.options.onError?.(err, 'release'));
  }

  private forget(lease: HeldLease): void {
    if (!this.held.delete(lease)) return;
    removeFrom(this.groups, lease.group, lease);
    removeFrom(this.riding, slotKey(lease.group, lease.request.session), lease);
    for (const s of lease.sessions.keys()) removeFrom(this.riding, slotKey(lease.group, s), lease);
  }
}

const always = () => true;

function slotKey(group: string, session: string | undefined): string {
  return `${group}\n${session ?? ''}`;
}

function addTo<T>(index: Map<string, Set<T>>, key: string, lease: T): void {
  const set = index.get(key);
  if (set === undefined) index.set(key, new Set([lease]));
  else set.add(lease);
}

function removeFrom<T>(index: Map<string, Set<T>>, key: string, lease: T): void {
  const set = index.get(key);
  if (set === undefined) return;
  set.delete(lease);
  if (set.size === 0) index.delete(key);
}

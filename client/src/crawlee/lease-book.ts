// The live leases and the sessions bound to them: each (session, host) uses one lease, each
// host's leases are found least shared first, and a new session joins the lease it should
// (shareable). No server calls here: session-leases.ts decides when a lease comes and goes.
import { Bindings, slotOf } from './bindings.js';
import { LeastShared } from './least-shared.js';
import { hostKey, mayJoin, type SharedLease } from './shared-lease.js';

export class LeaseBook {
  /** (session, host) → the lease it uses. */
  private readonly bindings = new Bindings<SharedLease>();
  /** Every live lease, by host key, found least shared first. */
  private readonly byHost = new Map<string, LeastShared<SharedLease>>();
  private leaseCount = 0;

  /** Leases held right now. */
  get count(): number {
    return this.leaseCount;
  }

  /** The lease `session` uses for `host`. */
  bound(session: string | undefined, host: string | undefined): SharedLease | undefined {
    return this.bindings.get(session, host);
  }

  /** The lease `session` uses for `host`, if it goes through `proxyUrl`. */
  sharedFor(
    session: string | undefined,
    host: string | undefined,
    proxyUrl: string,
  ): SharedLease | undefined {
    const shared = this.bindings.get(session, host);
    return shared?.lease.proxy.url === proxyUrl ? shared : undefined;
  }

  /** What `session` is bound to, for every host. */
  ofSession(session: string): SharedLease[] {
    return this.bindings.ofSession(session);
  }

  /** A lease granted now is live: shareable and counted. */
  add(shared: SharedLease): void {
    let forHost = this.byHost.get(hostKey(shared.host));
    if (forHost === undefined) this.byHost.set(hostKey(shared.host), (forHost = new LeastShared()));
    forHost.add(shared);
    this.leaseCount++;
  }

  /**
   * Takes a lease out (its sessions unbound, no longer live). Undefined when it was not live;
   * otherwise whether the host still has a lease on its proxy, and any lease at all.
   */
  remove(shared: SharedLease): { proxyStillLeased: boolean; hostEmpty: boolean } | undefined {
    for (const session of shared.bindings) this.bindings.deleteIf(session, shared.host, shared);
    shared.bindings.clear();
    shared.live = false;
    const forHost = this.byHost.get(hostKey(shared.host));
    if (!forHost?.delete(shared)) return undefined;
    this.leaseCount--;
    const proxyID = shared.lease.proxy.id;
    const proxyStillLeased = [...forHost].some((s) => s.lease.proxy.id === proxyID);
    if (forHost.size === 0) this.byHost.delete(hostKey(shared.host));
    return { proxyStillLeased, hostEmpty: forHost.size === 0 };
  }

  /** `session` uses `shared` for its host from now on. */
  attach(session: string | undefined, shared: SharedLease): void {
    shared.bindings.add(slotOf(session));
    this.counted(shared);
    this.bindings.set(session, shared.host, shared);
  }

  /** `session` stops using `shared`; true when no session is left on it. */
  detach(session: string | undefined, shared: SharedLease): boolean {
    this.bindings.deleteIf(session, shared.host, shared);
    shared.bindings.delete(slotOf(session));
    this.counted(shared);
    return shared.bindings.size === 0;
  }

  /** The live leases of `host`. */
  leasesOf(host: string | undefined): Iterable<SharedLease> {
    return this.byHost.get(hostKey(host)) ?? [];
  }

  /** How many live leases of `host` no session has joined yet. */
  unjoined(host: string | undefined): number {
    return this.byHost.get(hostKey(host))?.withUsers(0) ?? 0;
  }

  all(): SharedLease[] {
    return [...this.byHost.values()].flatMap((set) => [...set]);
  }

  /** Every live lease on the proxy, for every host. */
  leasesOn(proxyID: string): SharedLease[] {
    return [...this.byHost.values()].flatMap((set) => [...set].filter((s) => s.lease.proxy.id === proxyID));
  }

  anyLeaseOn(proxyUrl: string, host: string | undefined): SharedLease | undefined {
    for (const shared of this.leasesOf(host)) if (shared.lease.proxy.url === proxyUrl) return shared;
    return undefined;
  }

  /**
   * The live lease of `host` a new session should join: not resting if one is (then the one
   * whose rest ends first), then the fewest sessions on it. A lease no page has come back
   * through yet takes one session, while another lease can take the rest (mayJoin). `carries`
   * says whether a lease may carry requests, `restLeft` how long its proxy rests for the host.
   */
  shareable(
    host: string | undefined,
    carries: (shared: SharedLease) => boolean,
    restLeft?: (shared: SharedLease) => number,
  ): SharedLease | undefined {
    return (
      this.leastShared(host, (s) => mayJoin(s) && carries(s), restLeft) ??
      this.leastShared(host, carries, restLeft)
    );
  }

  private leastShared(
    host: string | undefined,
    accept: (shared: SharedLease) => boolean,
    restLeft: ((shared: SharedLease) => number) | undefined,
  ): SharedLease | undefined {
    const forHost = this.byHost.get(hostKey(host));
    // Called for every new session (a thousand with Crawlee's defaults) over hundreds of
    // leases: with no rest anywhere, the least shared lease comes from its bucket.
    if (restLeft === undefined) return forHost?.least(accept);
    let best: SharedLease | undefined;
    let bestRest = Infinity;
    for (const shared of forHost ?? []) {
      if (!accept(shared)) continue;
      const rest = restLeft(shared);
      if (
        best === undefined ||
        rest < bestRest ||
        (rest === bestRest && shared.bindings.size < best.bindings.size)
      ) {
        best = shared;
        bestRest = rest;
        // Nothing beats a lease with no rest and no session: the first one found is the one.
        if (rest === 0 && shared.bindings.size === 0) break;
      }
    }
    return best;
  }

  /** Keeps the host's buckets in step with a live lease's session count. */
  private counted(shared: SharedLease): void {
    if (shared.live) this.byHost.get(hostKey(shared.host))?.count(shared, shared.bindings.size);
  }
}

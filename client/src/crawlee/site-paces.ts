// The site's pace, kept per (proxy, host) over the live leases: which lease a request goes
// through when the site rate-limits, how long it waits, and what a 429 or a success teaches.
// The rules are pure (site-pace.ts, site-pace-sharing.ts); this keeps their state, shares what one proxy learns with
// the host's others, and wakes the requests waiting for a turn.
import {
  admit,
  rateLimited as paceRateLimited,
  restMs,
  succeeded as paceSucceeded,
  unpaced,
  type Pace,
} from './site-pace.js';
import { adopt, heardOfProbe, provenAfter429, provenByProbe, raiseTo } from './site-pace-sharing.js';
import {
  banKey,
  hostKey,
  type PaceCell,
  type PacedWait,
  type SessionLeasesStats,
  type SharedLease,
} from './shared-lease.js';

/** When a request may go through a lease: after waitMs; `probe` if only as a probe of its pace. */
export interface Turn {
  waitMs: number;
  probe: boolean;
  /** The pace after the request goes, when it may go now (admit's answer). */
  admitted?: { pace: Pace; probe: boolean };
}

/** What the pace needs of the rest of the bookkeeping. */
export interface PaceHost {
  /** The live leases of a host. */
  leasesOf(host: string | undefined): Iterable<SharedLease>;
  /** Whether a lease may still carry requests (live, not banned, not dead, not expired). */
  usable(shared: SharedLease): boolean;
  /** Every leased proxy of the host has used its pace: ask the server for one more. */
  starved(host: string | undefined): void;
  readonly stats: SessionLeasesStats;
  readonly maxWaitMs: number;
  now(): number;
}

export class SitePaces {
  /** `proxyID \0 host` → ms until which requests through that proxy to that host wait (a 429's rest). */
  private readonly rests = new Map<string, number>();
  /** `proxyID \0 host` → the pace the site allows that proxy, learned from its 429s. */
  private readonly paces = new Map<string, PaceCell>();
  /** Host key → the latest pace a 429 taught any proxy for that host (see adopt). */
  private readonly learned = new Map<string, Pace>();
  /** Host key → the limit the site has shown it allows every source (see provenAfter429). */
  private readonly proven = new Map<string, number>();
  /** Host key → requests waiting for the pace, woken when a new lease of the host arrives. */
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly host: PaceHost) {}

  /** Entries held (for the bound's test). */
  get size(): number {
    return this.rests.size + this.paces.size + this.learned.size + this.proven.size;
  }

  /** No proxy rests for any host (the common case: no lookups then). */
  get restless(): boolean {
    return this.rests.size === 0;
  }

  /** How long the proxy of `key` still rests, 0 when it does not. */
  restLeft(key: string, now: number): number {
    return this.rests.size === 0 ? 0 : Math.max(0, (this.rests.get(key) ?? 0) - now);
  }

  /** The pace cell of `key`, made on first use. */
  cell(key: string): PaceCell {
    let cell = this.paces.get(key);
    if (cell === undefined) this.paces.set(key, (cell = { pace: undefined }));
    return cell;
  }

  /**
   * The lease this request goes through when the site rate-limits: its own unless that proxy
   * rests for the host or has used its pace (see site-pace.ts); then another live lease of the
   * host with room now (the session stays bound to its own); when none has room, the one whose
   * turn comes first, after waiting for it (short by nature: a 429's Retry-After). Waiting
   * costs a Crawlee concurrency slot, and Crawlee's default pool starts at one, so a request
   * waits only when no leased proxy of the site may take it. Undefined: the own lease became
   * unusable while waiting.
   */
  async through(
    own: SharedLease,
    host: string | undefined,
    wait: PacedWait,
  ): Promise<SharedLease | undefined> {
    const { stats } = this.host;
    const started = this.host.now();
    for (;;) {
      let best = own;
      let turn = this.turnIn(own, host);
      // A probe of a higher limit is the last resort: a token on another proxy goes first.
      if (turn.waitMs > 0 || turn.probe) {
        for (const other of this.host.leasesOf(host)) {
          if (other === own || !this.host.usable(other)) continue;
          const otherTurn = this.turnIn(other, host);
          if (isSooner(otherTurn, turn)) [best, turn] = [other, otherTurn];
          if (turn.waitMs === 0 && !turn.probe) break;
        }
      }
      const left = this.host.maxWaitMs - (this.host.now() - started);
      if (turn.waitMs === 0 || left <= 0) {
        this.take(best, host, turn.waitMs === 0 ? turn : undefined);
        return best;
      }
      this.countPaced(wait);
      // Every leased proxy of the site has used its pace: a proxy not yet leased has all of
      // its own (a crawl's first second leases its proxies one session at a time).
      this.host.starved(host);
      const sleptFrom = this.host.now();
      await this.sleep(host, Math.min(turn.waitMs, left));
      stats.pacedMs += this.host.now() - sleptFrom;
      if (!this.host.usable(own)) return undefined;
    }
  }

  /**
   * One request's wait counts once in stats.paced, however many sleeps it takes and wherever:
   * a timer may fire a millisecond before Date.now() says the turn has come, a lease arriving
   * wakes it early, and the server may say every proxy rests more than once.
   */
  countPaced(wait: PacedWait): void {
    if (!wait.counted) this.host.stats.paced++;
    wait.counted = true;
  }

  /** When a request may go through this lease to `host`: its proxy's rest, then its pace. */
  turnIn(shared: SharedLease, host: string | undefined): Turn {
    const now = this.host.now();
    // Most crawls never see a 429: no lookup then (this runs on every request).
    const rest = this.rests.size === 0 ? 0 : (this.rests.get(shared.key) ?? 0) - now;
    if (rest > 0) return { waitMs: rest, probe: false };
    const admitted = admit(this.paceOf(shared.pace, host) ?? unpaced, now);
    // A blind pace raises its rate on a turn that must wait (site-pace.ts): the raise is kept.
    if (admitted.waitMs > 0 && admitted.pace.limit !== shared.pace.pace?.limit)
      shared.pace.pace = admitted.pace;
    return { waitMs: admitted.waitMs, probe: admitted.probe, admitted };
  }

  /**
   * A request goes through `shared` now: its pace spends a token (or, unpaced, remembers the
   * request, for adopt; see site-pace.ts), from `turn` when it was just taken for this request.
   */
  take(shared: SharedLease, host: string | undefined, turn: Turn | undefined): void {
    const admitted = turn?.admitted ?? admit(this.paceOf(shared.pace, host) ?? unpaced, this.host.now());
    shared.pace.pace = admitted.pace;
    if (admitted.probe) {
      this.proven.set(hostKey(host), provenByProbe(this.proven.get(hostKey(host)) ?? 0, admitted.pace));
      this.spreadProbe(host, admitted.pace, shared.lease.proxy.id);
    }
  }

  /** A request through the proxy of `cell` succeeded. */
  succeeded(cell: PaceCell): void {
    cell.pace = paceSucceeded(cell.pace ?? unpaced, this.host.now());
  }

  /** A request through `proxyID` to `host` succeeded after its lease ended: its pace learns from it while it has one. */
  succeededAfter(proxyID: string, host: string | undefined): void {
    const cell = this.paces.get(banKey(proxyID, host));
    if (cell !== undefined) this.succeeded(cell);
  }

  /**
   * A 429 through `proxyID` to `host` (Retry-After in seconds when the response had one): the
   * pace learns from it (site-pace.ts) and the proxy rests for the host. True when this starts
   * a rest (the server is to be told; a 429 during a rest came from a request sent before it).
   */
  rateLimited(proxyID: string, host: string | undefined, retryAfterSeconds: number | undefined): boolean {
    const key = banKey(proxyID, host);
    const now = this.host.now();
    const retryAfterMs = retryAfterSeconds === undefined ? undefined : retryAfterSeconds * 1000;
    const cell = this.cell(key);
    const before = this.paceOf(cell, host) ?? unpaced;
    const pace = paceRateLimited(before, now, retryAfterMs);
    this.proven.set(hostKey(host), provenAfter429(this.proven.get(hostKey(host)) ?? 0, before, pace, now));
    cell.pace = pace;
    if (pace.limit !== undefined) this.learned.set(hostKey(host), pace);
    this.spreadProbe(host, pace, proxyID);
    // A 429 that came back after its lease ended: the host learned from it, and no cell is
    // kept for a pair no lease holds (memory stays bounded by the live leases).
    const leases = [...this.host.leasesOf(host)];
    if (!leases.some((s) => s.lease.proxy.id === proxyID)) this.paces.delete(key);
    if (leases.length === 0) this.forgetHost(host);
    if ((this.rests.get(key) ?? 0) > now) return false;
    this.rests.set(key, now + restMs(pace, now, retryAfterMs));
    this.sweepRests(now);
    return true;
  }

  /** The server's word on how long the proxy rests for the host (its cooldown, when it honours a Retry-After). */
  restUntil(proxyID: string, host: string | undefined, until: number): void {
    this.rests.set(banKey(proxyID, host), until);
  }

  /** Sleeps `ms`, or until a new lease of `host` arrives (it may have room now). */
  sleep(host: string | undefined, ms: number): Promise<void> {
    const key = hostKey(host);
    return new Promise((resolve) => {
      let waiters = this.waiters.get(key);
      if (waiters === undefined) this.waiters.set(key, (waiters = new Set()));
      const wake = () => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.waiters.get(key) === waiters) this.waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      waiters.add(wake);
    });
  }

  /** A new lease of `host` arrived: every request waiting for a turn looks again. */
  wake(host: string | undefined): void {
    for (const wake of [...(this.waiters.get(hostKey(host)) ?? [])]) wake();
  }

  /**
   * The last live lease of the proxy for `host` ended: its pace and rest go (the pace is
   * learned per lease's life: memory stays bounded by the live leases; a rest that has not
   * ended is kept until it does, since the server may lease the proxy again at once).
   */
  forgetPair(proxyID: string, host: string | undefined): void {
    const key = banKey(proxyID, host);
    this.paces.delete(key);
    if ((this.rests.get(key) ?? 0) <= this.host.now()) this.rests.delete(key);
  }

  /** The host's last live lease ended: what it taught about the host goes too. */
  forgetHost(host: string | undefined): void {
    this.learned.delete(hostKey(host));
    this.proven.delete(hostKey(host));
  }

  /** Drops ended rests (a rest outlives its lease: swept as new ones come). */
  private sweepRests(now: number): void {
    if (this.rests.size < 64) return;
    for (const [key, until] of this.rests) if (until <= now) this.rests.delete(key);
  }

  /** One proxy's probe of `host` (or its refusal) stands for every proxy of that host (see heardOfProbe). */
  private spreadProbe(host: string | undefined, from: Pace, proxyID: string): void {
    for (const shared of this.host.leasesOf(host)) {
      const id = shared.lease.proxy.id;
      if (id === proxyID) continue;
      const cell = this.paces.get(banKey(id, host));
      if (cell?.pace !== undefined)
        cell.pace = heardOfProbe(cell.pace, from.probedAt, from.probeAfterPeriods);
    }
  }

  /**
   * The proxy's pace for `host`: its own, or the one another proxy learned for that host; at
   * least the limit the site has shown it allows every source.
   */
  private paceOf(cell: PaceCell, host: string | undefined): Pace | undefined {
    const own = cell.pace;
    // Before any 429 of any host (most crawls), nothing was learned: no lookups per request.
    if (this.learned.size === 0 && this.proven.size === 0) return own;
    let pace = own;
    const learned = this.learned.get(hostKey(host));
    if (own?.limit === undefined && learned !== undefined)
      pace = adopt(own ?? unpaced, learned, this.host.now());
    if (pace !== undefined) pace = raiseTo(pace, this.proven.get(hostKey(host)) ?? 0);
    if (pace !== own && pace !== undefined) cell.pace = pace;
    return pace;
  }
}

/**
 * A token now beats a probe now, which beats any wait; between waits, the shorter; between
 * probes, the one of the proxy with the higher limit. A probe the site let through raises only
 * its own proxy, and the site's limit is shown for every proxy when a proxy's next probe is
 * refused (provenAfter429). Each probe defers every proxy's next one, so when any proxy could
 * probe, the one whose limit a probe already raised goes again. A crawl whose first limit came
 * out low (two a second where the site allows three) took five probes of five different
 * proxies to get one refused, 25 s at two thirds of the site's rate; now it takes two.
 */
export function isSooner(a: Turn, b: Turn): boolean {
  if (a.waitMs !== b.waitMs) return a.waitMs < b.waitMs;
  if (a.probe !== b.probe) return !a.probe;
  return a.probe && (a.admitted?.pace.limit ?? 0) > (b.admitted?.pace.limit ?? 0);
}

// The memory book's counts behind the per-owner quotas it judges: each owner's live leases
// (LeaseRequest.leaseQuota) and the (proxy, target) cooldowns its reports started or extended,
// with the latest end each gave (ReportDetails.cooldownQuota). The Redis book keeps the same
// in P:tl:<owner> and P:tc:<owner>, judged by its acquire and report scripts.
import { CooldownQuotaRefusal, type BatchReport, type Lease } from './lease-store.js';
import { cooldownVerdict, leaseVerdict } from './tenant-quotas.js';

/** One report of a call as the quota sees it; undefined: it cannot start a cooldown. */
export interface QuotaReport {
  proxyID: string;
  target: string;
  quota: number;
}

export class OwnerHoldings {
  /** owner -> proxyID \0 target -> end (ms). */
  private readonly owners = new Map<string, Map<string, number>>();
  /** owner -> live leases. */
  private readonly leases = new Map<string, number>();

  /** The owner's live leases (0 for no owner: in-process calls have no quota). */
  leasesOf(owner: string | undefined): number {
    return owner === undefined ? 0 : (this.leases.get(owner) ?? 0);
  }

  /** Whether the owner may take one more lease under `quota` (none: no quota). */
  leaseRefused(owner: string | undefined, quota: number | undefined): boolean {
    return (
      owner !== undefined &&
      quota !== undefined &&
      leaseVerdict(this.leasesOf(owner), quota) === 'lease_quota'
    );
  }

  leaseChanged(owner: string | undefined, delta: 1 | -1): void {
    if (owner === undefined) return;
    const held = this.leasesOf(owner) + delta;
    if (held > 0) this.leases.set(owner, held);
    else this.leases.delete(owner);
  }

  /**
   * The index of the first report that would start a cooldown beyond its owner's quota (the
   * call's own new pairs counted), or undefined when every one fits.
   */
  refused(owner: string, reports: readonly (QuotaReport | undefined)[], now: number): number | undefined {
    const pairs = this.owners.get(owner) ?? new Map<string, number>();
    for (const [pair, until] of pairs) if (until <= now) pairs.delete(pair);
    const added = new Set<string>();
    for (const [i, report] of reports.entries()) {
      if (report === undefined) continue;
      const pair = `${report.proxyID}\u0000${report.target}`;
      const known = pairs.has(pair) || added.has(pair);
      if (cooldownVerdict(known, pairs.size + added.size, report.quota) === 'cooldown_quota') return i;
      if (!known) added.add(pair);
    }
    return undefined;
  }

  /**
   * Throws CooldownQuotaRefusal for the first of a call's reports beyond its owner's quota;
   * `leaseOf` finds the owner's live leases.
   */
  check(
    reports: readonly BatchReport[],
    owner: string | undefined,
    leaseOf: (leaseID: string) => Lease | undefined,
    now: number,
  ): void {
    if (owner === undefined) return;
    const asked = reports.map(({ leaseID, result, details = {} }) => {
      const lease = leaseOf(leaseID);
      if (lease === undefined || details.cooldownQuota === undefined) return undefined;
      if (result !== 'banned' && result !== 'rate_limited') return undefined;
      return {
        proxyID: lease.proxyID,
        target: details.target ?? lease.target ?? '',
        quota: details.cooldownQuota,
      };
    });
    const refused = this.refused(owner, asked, now);
    if (refused !== undefined) throw new CooldownQuotaRefusal(refused);
  }

  recorded(owner: string, proxyID: string, target: string, until: number): void {
    let pairs = this.owners.get(owner);
    if (pairs === undefined) this.owners.set(owner, (pairs = new Map()));
    const pair = `${proxyID}\u0000${target}`;
    pairs.set(pair, Math.max(until, pairs.get(pair) ?? 0));
  }

  /** Forgets ended cooldowns, and owners with none running. */
  sweep(now: number): void {
    for (const [owner, pairs] of this.owners) {
      for (const [pair, until] of pairs) if (until <= now) pairs.delete(pair);
      if (pairs.size === 0) this.owners.delete(owner);
    }
  }
}

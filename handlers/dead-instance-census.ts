import type { CacheReader } from '../framework/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import type { Instance, Provider } from '../providers/contract.js';
import { deadInstanceHold, deadShare, isDead } from './dead-instance-hold.js';
import { PROXY_KIND } from './kinds.js';
import type { RepairHold } from './repair-hold.js';

/** How long one listing of a provider's instances answers for every dead-instance decision. */
const LISTING_MILLIS = 5000;

interface Listing {
  at: number;
  dead: Promise<ReadonlySet<string>>;
}

/**
 * The shell of the dead-instance hold (dead-instance-hold.ts, which decides): asked only when
 * a get reports a proxy's instance dead, it lists the provider's instances (one listByTag per
 * provider per 5 s, shared by concurrent asks) and counts the provider's serving proxies from
 * the cache, and its namespace's part. A listing that does not yet show the asker dead is read
 * again: otherwise proxies dying one after another inside its age would each look alone, and
 * each be deleted.
 * A listing that fails throws: the caller's provider-error step, and nothing is deleted.
 */
export class DeadInstanceCensus {
  private readonly listings = new Map<string, Listing>();

  constructor(private readonly now: () => number = Date.now) {}

  async hold(
    provider: { name: string; api: Provider; ownerID: string },
    own: Instance,
    /** The asking proxy's namespace: its team (deadInstanceHold). */
    namespace: string,
    cache: CacheReader,
    maxUnhealthyPercent: number,
    signal?: AbortSignal,
  ): Promise<RepairHold> {
    const deadIDs = await this.deadIDs(provider, own.id, signal);
    const proxies = cache
      .list<Proxy>(PROXY_KIND)
      .filter(
        (p) =>
          p.spec.mode === 'Managed' && p.spec.provider === provider.name && !p.metadata.deletionTimestamp,
      )
      .map((p) => ({
        providerID: p.status?.providerID,
        phase: p.status?.phase,
        namespace: p.metadata.namespace ?? '',
      }));
    return deadInstanceHold({
      provider: provider.name,
      namespace,
      share: deadShare(proxies, deadIDs, own.id, namespace),
      maxUnhealthyPercent,
    });
  }

  private async deadIDs(
    provider: { name: string; api: Provider; ownerID: string },
    ownID: string,
    signal?: AbortSignal,
  ): Promise<ReadonlySet<string>> {
    const known = this.listings.get(provider.name);
    const now = this.now();
    if (known && now - known.at < LISTING_MILLIS) {
      const dead = await known.dead.catch(() => undefined);
      if (dead?.has(ownID)) return dead;
    }
    const dead = provider.api
      .listByTag(provider.ownerID, signal)
      .then((all) => new Set(all.filter(isDead).map((i) => i.id)));
    const listing = { at: now, dead };
    this.listings.set(provider.name, listing);
    // A failed listing is not kept: the next ask lists again.
    dead.catch(() => {
      if (this.listings.get(provider.name) === listing) this.listings.delete(provider.name);
    });
    return dead;
  }
}

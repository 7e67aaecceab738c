import { Counter, type Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { background, daemon, type OperatorContext } from '../framework/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import type { ProviderSet } from '../providers/registry.js';
import { PROXY_KIND } from './kinds.js';
import { findOrphans, orphanReason, wantedBy } from './orphans.js';
import type { HandlerSettings } from './settings.js';
import { HANDLER_SETTINGS, METRICS_REGISTRY, PROVIDERS } from './tokens.js';

/**
 * Leader-only safety net for crashes mid-create: deletes tagged instances whose Proxy is
 * gone. A Proxy being deleted is still in the cache until its finalizer is removed, so
 * its instance is spared.
 */
@background()
export class OrphanSweep {
  private readonly deleted: Counter<'provider'>;

  constructor(
    @inject(PROVIDERS) private readonly providers: ProviderSet,
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(METRICS_REGISTRY) registry: Registry,
  ) {
    this.deleted = new Counter({
      name: 'proxy_operator_orphans_deleted_total',
      help: 'Instances deleted by the orphan sweep because no live Proxy owns them.',
      labelNames: ['provider'],
      registers: [registry],
    });
  }

  @daemon()
  async run(ctx: OperatorContext): Promise<void> {
    while (!ctx.signal.aborted) {
      await this.sweepOnce(ctx);
      await ctx.sleep(this.settings.orphanSweepIntervalSeconds * 1000);
    }
  }

  async sweepOnce(ctx: OperatorContext): Promise<number> {
    let killed = 0;
    for (const [name, provider] of this.providers.entries()) {
      try {
        // Cloud first, Proxies second: a Proxy created in between is then seen as live.
        const instances = await provider.listByTag(this.settings.ownerID, ctx.signal);
        const live = wantedBy(ctx.cache.list<Proxy>(PROXY_KIND));
        for (const orphan of findOrphans(instances, live, new Date(), this.settings.orphanMinAgeSeconds)) {
          ctx.logger.warn(
            { provider: name, providerID: orphan.id, uid: orphan.uid, why: orphanReason(orphan, live) },
            'deleting orphaned instance',
          );
          await provider.delete(orphan.id, ctx.signal);
          this.deleted.inc({ provider: name });
          killed++;
        }
      } catch (err) {
        ctx.logger.error({ provider: name, err: (err as Error).message }, 'orphan sweep failed for provider');
      }
    }
    return killed;
  }
}

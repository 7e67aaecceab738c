import { Counter, Gauge, type Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { background, daemon, type OperatorContext } from '../framework/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import type { ProviderSet } from '../providers/registry.js';
import { PROXY_KIND } from './kinds.js';
import { explainOrphan, wantedBy, SPARE_REASONS, type SpareReason, type SweepScope } from './orphans.js';
import { explainDuplicate, sweepDecisions } from './duplicates.js';
import type { HandlerSettings } from './settings.js';
import { HANDLER_SETTINGS, METRICS_REGISTRY, PROVIDERS } from './tokens.js';

/**
 * Leader-only safety net for crashes mid-create: deletes tagged instances whose Proxy is
 * gone. A Proxy being deleted is still in the cache until its finalizer is removed, so
 * its instance is spared. Only this operator's instances (its owner identity) in the
 * namespaces it watches are judged; everything else is left alone. Also deletes the extra
 * instances of one revision (duplicates.ts). Aborts between calls.
 */
@background()
export class OrphanSweep {
  private readonly deleted: Counter<'provider'>;
  private readonly spared: Gauge<'provider' | 'reason'>;
  private readonly duplicates: Counter<'provider'>;

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
    this.spared = new Gauge({
      name: 'proxy_operator_orphan_sweep_spared',
      help: 'Instances of this operator the last sweep left alone, by reason (Wanted, TooYoung, UnwatchedNamespace, Unrevisioned, OtherOwner).',
      labelNames: ['provider', 'reason'],
      registers: [registry],
    });
    this.duplicates = new Counter({
      name: 'proxy_operator_duplicate_instances_deleted_total',
      help: 'Extra instances of one Proxy revision (a create that landed twice) deleted by the sweep; the recorded or oldest one is kept.',
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
    const scope: SweepScope = { owner: this.settings.ownerID, namespace: this.settings.watchNamespace };
    let killed = 0;
    for (const [name, provider] of this.providers.entries()) {
      if (ctx.signal.aborted) break;
      try {
        // A series from the first sweep on: increase() cannot see a counter's first value, so
        // the ProxyOrphansSwept alert would miss a process's first deletions without the 0.
        this.deleted.inc({ provider: name }, 0);
        this.duplicates.inc({ provider: name }, 0);
        // Cloud first, Proxies second: a Proxy created in between is then seen as live.
        const instances = await provider.listByTag(scope.owner, ctx.signal);
        const live = wantedBy(ctx.cache.list<Proxy>(PROXY_KIND));
        const spared = new Map<SpareReason, number>();
        const decisions = sweepDecisions(
          instances,
          live,
          scope,
          new Date(),
          this.settings.orphanMinAgeSeconds,
        );
        for (const { instance, decision: verdict } of decisions) {
          if (!verdict.collect) {
            spared.set(verdict.reason, (spared.get(verdict.reason) ?? 0) + 1);
            continue;
          }
          // Leadership lost or shutting down: stop between deletes, never mid-list.
          if (ctx.signal.aborted) break;
          ctx.logger.warn(
            {
              provider: name,
              providerID: instance.id,
              uid: instance.uid,
              namespace: instance.namespace,
              why:
                verdict.reason === 'DuplicateRevision'
                  ? explainDuplicate(verdict.keeper)
                  : explainOrphan(verdict.reason),
            },
            verdict.reason === 'DuplicateRevision'
              ? 'deleting duplicate instance'
              : 'deleting orphaned instance',
          );
          await provider.delete(instance.id, ctx.signal);
          if (verdict.reason === 'DuplicateRevision') this.duplicates.inc({ provider: name });
          else this.deleted.inc({ provider: name });
          killed++;
        }
        for (const reason of SPARE_REASONS)
          this.spared.set({ provider: name, reason }, spared.get(reason) ?? 0);
      } catch (err) {
        if (ctx.signal.aborted) break;
        ctx.logger.error({ provider: name, err: (err as Error).message }, 'orphan sweep failed for provider');
      }
    }
    return killed;
  }
}

import { inject, injectable } from 'tsyringe';
import {
  controller,
  onCreate,
  onDelete,
  onResume,
  onUpdate,
  PermanentError,
  timer,
  watches,
  type CacheReader,
  type HandlerContext,
  type HandlerResult,
} from '../framework/index.js';
import {
  FINALIZER,
  CLOUD_INIT_SECRET_LABEL,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Proxy,
} from '../crds/proxy-types.js';
import type { Provider } from '../providers/contract.js';
import {
  isNotFound,
  isPermanent,
  isProviderError,
  isQuotaExceeded,
  QUOTA_RETRY_SECONDS,
} from '../providers/errors.js';
import { PROVIDERS, type ProviderSet } from '../providers/registry.js';
import { proxiesUsingSecret, resolveCloudInit, type SecretLike } from './cloud-init.js';
import { PROXY_KIND, SECRET_KIND } from './kinds.js';
import { externalStep, managedStep, type Observation, type Step } from './proxy-state-machine.js';
import { specHash } from './spec-hash.js';
import { writeStatus, type StatusOverride } from './proxy-status.js';
import { VERDICTS, type VerdictBoard } from './verdict-board.js';
import { proxyAddress, proxyKey } from './proxy-address.js';
import { PROXY_TRIGGER, type ProxyTrigger } from './proxy-trigger.js';
import { HANDLER_SETTINGS, type HandlerSettings } from './settings.js';

/** Seconds between drift checks of a steady Managed proxy. */
export const DRIFT_CHECK_SECONDS = 60;

function mapSecretToProxies(secret: SecretLike, cache: CacheReader) {
  return proxiesUsingSecret(secret, cache.list<Proxy>(PROXY_KIND)).map((p) => ({
    namespace: p.metadata.namespace,
    name: p.metadata.name,
  }));
}

/**
 * The Proxy reconciler. Create, update and resume all run the same level-triggered
 * state machine: the cause only says why we were woken, never what to do.
 */
@controller({ ...PROXY_KIND, finalizer: FINALIZER, maxConcurrentReconciles: 3 })
@watches({ ...SECRET_KIND, labelSelector: `${CLOUD_INIT_SECRET_LABEL}=true`, map: mapSecretToProxies })
@injectable()
export class ProxyController {
  constructor(
    @inject(PROVIDERS) private readonly providers: ProviderSet,
    @inject(VERDICTS) private readonly verdicts: VerdictBoard,
    @inject(PROXY_TRIGGER) private readonly trigger: ProxyTrigger,
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
  ) {}

  @onCreate()
  @onUpdate()
  @onResume()
  async reconcile(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    const proxy = ctx.object;
    const verdict = this.verdicts.get(proxyKey(proxy), proxyAddress(proxy));
    if (proxy.spec.mode === 'External') {
      await this.apply(ctx, externalStep(proxy, verdict));
      return;
    }
    const providerName = proxy.spec.provider ?? '';
    const provider = this.providers.get(providerName);
    if (!provider) {
      const message = `provider "${providerName}" is not configured (configured: ${this.providers.names().join(', ') || 'none'})`;
      await this.fail(ctx, 'UnknownProvider', message);
      throw new PermanentError(message);
    }

    const ci = resolveCloudInit(proxy, (ns, name) =>
      ctx.cache.get<SecretLike & { metadata: { name: string } }>(SECRET_KIND, ns, name),
    );
    const desiredHash = ci.ok ? specHash(proxy.spec, ci.content) : undefined;
    const providerID = proxy.status?.providerID;
    try {
      const observation = await this.observe(provider, providerID, ctx.signal);
      const step = managedStep({
        proxy,
        desiredHash,
        cloudInitError: ci.ok ? undefined : ci.message,
        observation,
        verdict,
      });
      if (step.annotateHash) {
        await ctx.patchMetadata({ annotations: { [SPEC_HASH_ANNOTATION]: step.annotateHash } });
      }
      const override = await this.act(ctx, provider, step, ci.ok ? ci.content : undefined, desiredHash);
      await this.apply(ctx, step, override);
      return step.requeueAfter !== undefined ? { requeueAfter: step.requeueAfter } : undefined;
    } catch (err) {
      // Kubernetes API failures are the framework's to retry; only provider errors are ours.
      if (!isProviderError(err)) throw err;
      return this.onProviderError(ctx, providerName, providerID, err);
    }
  }

  /**
   * Notices an instance deleted or stopped behind the operator's back. Timers do not
   * requeue, so when the state machine wants to come back soon the object is handed to
   * the work queue.
   */
  @timer({ interval: DRIFT_CHECK_SECONDS, jitter: 0.2 })
  async checkDrift(ctx: HandlerContext<Proxy>): Promise<void> {
    const p = ctx.object;
    if (p.spec.mode !== 'Managed' || p.metadata.deletionTimestamp) return;
    // Only a steady, running proxy: anything else is already on the work queue, and a timer
    // must not retry a Failed proxy or cut a quota back-off short.
    const provisioned = p.status?.conditions?.find((c) => c.type === CONDITION_PROVISIONED);
    if (provisioned?.reason !== 'InstanceRunning') return;
    const result = await this.reconcile(ctx);
    if (result?.requeueAfter !== undefined)
      this.trigger.fire(PROXY_KIND, p.metadata.namespace, p.metadata.name);
  }

  @onDelete({ when: (p: Proxy) => p.spec.mode === 'Managed' })
  async cleanup(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    const proxy = ctx.object;
    const providerName = proxy.spec.provider ?? '';
    const provider = this.providers.get(providerName);
    const providerID = proxy.status?.providerID;
    // Nothing recorded means nothing to delete here; an instance created in a crash window
    // before its providerID was written is found by the orphan sweep.
    if (!provider || !providerID) return;
    if (proxy.status?.phase !== 'Deleting') {
      await ctx.status.patch({ phase: 'Deleting' });
      await ctx.events.normal('Deleting', `deleting instance ${providerID}`);
      ctx.logger.info({ provider: providerName, providerID }, 'deleting instance');
    }
    try {
      await provider.get(providerID, ctx.signal);
    } catch (err) {
      if (isNotFound(err)) {
        ctx.logger.info({ provider: providerName, providerID }, 'instance gone; releasing finalizer');
        return;
      }
      return this.onProviderError(ctx, providerName, providerID, err, true);
    }
    try {
      await provider.delete(providerID, ctx.signal);
    } catch (err) {
      return this.onProviderError(ctx, providerName, providerID, err, true);
    }
    // Requeue until get says NotFound: deletion at a cloud is asynchronous.
    return { requeueAfter: 2 };
  }

  private async observe(
    provider: Provider,
    providerID: string | undefined,
    signal: AbortSignal,
  ): Promise<Observation> {
    if (!providerID) return { kind: 'unprovisioned' };
    try {
      return { kind: 'found', instance: await provider.get(providerID, signal) };
    } catch (err) {
      if (isNotFound(err)) return { kind: 'not-found' };
      throw err;
    }
  }

  private async act(
    ctx: HandlerContext<Proxy>,
    provider: Provider,
    step: Step,
    cloudInit: string | undefined,
    revision: string | undefined,
  ): Promise<StatusOverride> {
    const proxy = ctx.object;
    const log = { provider: proxy.spec.provider, providerID: proxy.status?.providerID };
    switch (step.action.type) {
      case 'create': {
        const id = await provider.create(
          {
            uid: proxy.metadata.uid ?? '',
            revision,
            proxy: `${proxy.metadata.namespace}/${proxy.metadata.name}`,
            namespace: proxy.metadata.namespace ?? '',
            owner: this.settings.ownerID,
            port: proxy.spec.port,
            cloudInit,
            placement: proxy.spec.placement ?? {},
          },
          ctx.signal,
        );
        ctx.logger.info({ ...log, providerID: id }, 'instance creation submitted');
        return { providerID: id };
      }
      case 'delete':
        ctx.logger.warn({ ...log, providerID: step.action.providerID }, step.status.provisioned.message);
        await provider.delete(step.action.providerID, ctx.signal);
        return {};
      case 'forget':
        ctx.logger.info(log, step.status.provisioned.message);
        return {};
      case 'none':
        return {};
    }
  }

  private async apply(ctx: HandlerContext<Proxy>, step: Step, override: StatusOverride = {}): Promise<void> {
    const previous = ctx.object.status?.phase;
    const changed = await writeStatus(ctx, step.status, override);
    if (!changed) return;
    if (step.event) {
      if (step.event.type === 'Warning') await ctx.events.warning(step.event.reason, step.event.message);
      else await ctx.events.normal(step.event.reason, step.event.message);
    }
    const phase = step.status.phase;
    if (previous === phase) return;
    ctx.logger.info(
      { from: previous ?? 'none', phase, reason: step.status.provisioned.reason },
      'phase changed',
    );
    // Health transitions are Events too: `kubectl describe px` tells the story.
    const health = step.status.healthy;
    if (phase === 'Ready') await ctx.events.normal('Ready', `proxy is healthy: ${health.message}`);
    if (phase === 'Unhealthy')
      await ctx.events.warning('Unhealthy', `proxy is unhealthy (${health.reason}): ${health.message}`);
  }

  private async fail(ctx: HandlerContext<Proxy>, reason: string, message: string): Promise<void> {
    await writeStatus(
      ctx,
      {
        phase: 'Failed',
        providerID: ctx.object.status?.providerID ?? null,
        ip: ctx.object.status?.ip ?? null,
        provisioned: { status: 'False', reason, message },
        healthy: { status: 'Unknown', reason: 'AwaitingProbe', message: 'no health verdict yet' },
      },
      {},
    );
    await ctx.events.warning(reason, message);
  }

  private async onProviderError(
    ctx: HandlerContext<Proxy>,
    providerName: string,
    providerID: string | undefined,
    err: unknown,
    deleting = false,
  ): Promise<HandlerResult> {
    const message = err instanceof Error ? err.message : String(err);
    ctx.logger.error({ provider: providerName, providerID, err: message }, 'provider error');
    const keep = (reason: string, text: string) =>
      writeStatus(
        ctx,
        {
          phase: deleting ? 'Deleting' : (ctx.object.status?.phase ?? 'Pending'),
          providerID: ctx.object.status?.providerID ?? null,
          ip: ctx.object.status?.ip ?? null,
          provisioned: { status: 'False', reason, message: text },
          healthy: currentHealthy(ctx.object),
        },
        {},
      );
    if (isQuotaExceeded(err)) {
      const text = `quota exceeded at provider ${providerName}: ${message}; retrying in ${QUOTA_RETRY_SECONDS} s`;
      if (await keep('QuotaExceeded', text)) await ctx.events.warning('QuotaExceeded', text);
      return { requeueAfter: QUOTA_RETRY_SECONDS };
    }
    if (isPermanent(err) && !deleting) {
      await this.fail(ctx, 'ProvisioningFailed', message);
      throw new PermanentError(message);
    }
    await keep('ProviderError', `provider ${providerName}: ${message}`);
    // Transient (and unknown) errors: the framework's per-object exponential backoff.
    throw err;
  }
}

function currentHealthy(proxy: Proxy) {
  const c = proxy.status?.conditions?.find((x) => x.type === 'Healthy');
  return c
    ? { status: c.status, reason: c.reason, message: c.message }
    : { status: 'Unknown' as const, reason: 'AwaitingProbe', message: 'no health verdict yet' };
}

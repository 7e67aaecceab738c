import type { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import {
  controller,
  onCreate,
  onDelete,
  onResume,
  onUpdate,
  timer,
  watches,
  type CacheReader,
  type HandlerContext,
  type HandlerResult,
} from '../framework/index.js';
import { FINALIZER, CLOUD_INIT_SECRET_LABEL, SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';
import { isProviderError, type ProviderError } from '../providers/errors.js';
import type { ProviderSet } from '../providers/registry.js';
import { autopilotPolicy } from './autopilot-policy.js';
import { proxiesUsingSecret, resolveCloudInit, type SecretLike } from './cloud-init.js';
import { DeadInstanceCensus } from './dead-instance-census.js';
import { isDead } from './dead-instance-hold.js';
import { HeldRepairs } from './held-repairs.js';
import { actOnStep, type InstanceMaterial } from './instance-actions.js';
import { CLOUD_INIT_SECRETS, PROXY_KIND, SECRET_KIND } from './kinds.js';
import { ManagedCredentials } from './managed-credentials.js';
import { observeInstance } from './provider-observation.js';
import {
  CREDENTIALS_SECRETS,
  credentialsRecordMissing,
  credentialsRotated,
  proxiesUsingCredentials,
} from './proxy-credentials.js';
import {
  deletionNeedsInventory,
  deletionStep,
  externalStep,
  managedStep,
  needsInventory,
  providerErrorStep,
  unhealthyGrace,
  unknownProviderStep,
  wantsDriftCheck,
  type HealthVerdict,
  type Step,
} from './proxy-state-machine.js';
import { desiredRevision } from './credentials-digest.js';
import { legacySpecHash, specHash } from './spec-hash.js';
import type { StatusOverride } from './proxy-status.js';
import type { VerdictBoard } from './verdict-board.js';
import { proxyAddress, proxyKey } from './proxy-address.js';
import { ReplacementBudget, type SlotAnswer, type SlotKind } from './replacement-budget.js';
import { repairHold, sharesFor, type RepairHold } from './repair-hold.js';
import type { HandlerSettings } from './settings.js';
import { HANDLER_SETTINGS, LEASE_BOOK, METRICS_REGISTRY, PROVIDERS, VERDICTS } from './tokens.js';
import { cooldownSource, readBansDue, wantsBanCheck, type CooldownSource } from './ban-rotation.js';
import type { LeaseBook } from './lease-book.js';
import { StepRecorder } from './step-recorder.js';
import { handlerOutcome } from './step-outcome.js';

/** The Proxies a watched Secret's change concerns, as the framework's map function wants them. */
const refs = (proxies: readonly Proxy[]) =>
  proxies.map((p) => ({ namespace: p.metadata.namespace, name: p.metadata.name }));
const mapSecretToProxies = (secret: SecretLike, cache: CacheReader) =>
  refs(proxiesUsingSecret(secret, cache.list<Proxy>(PROXY_KIND)));
const mapCredentialsToProxies = (secret: SecretLike, cache: CacheReader) =>
  refs(proxiesUsingCredentials(secret, cache.list<Proxy>(PROXY_KIND)));

/** The failure step for a provider error (the state machine says what it means). */
function failed(
  proxy: Proxy,
  verdict: HealthVerdict | undefined,
  err: ProviderError,
  deleting: boolean,
): Step {
  return providerErrorStep({
    proxy,
    verdict,
    deleting,
    failure: {
      provider: proxy.spec.provider ?? '',
      operation: err.operation,
      kind: err.kind,
      message: err.message,
    },
  });
}

/**
 * The Proxy reconciler: the imperative shell around the pure state machine
 * (proxy-state-machine.ts), which makes every status, Event and retry decision. This class
 * only observes (provider-observation.ts), acts (instance-actions.ts, the credentials Secrets
 * through managed-credentials.ts) and writes (step-recorder.ts). Create, update and resume all
 * run the same level-triggered state machine.
 */
@controller({ ...PROXY_KIND, finalizer: FINALIZER, maxConcurrentReconciles: 3 })
@watches({ ...SECRET_KIND, labelSelector: `${CLOUD_INIT_SECRET_LABEL}=true`, map: mapSecretToProxies })
@watches({ ...CREDENTIALS_SECRETS, map: mapCredentialsToProxies })
export class ProxyController {
  private readonly budget: ReplacementBudget;
  private readonly credentials: ManagedCredentials;
  /** The lease book's cooldowns, for spec.rotation.whenCoolingDownOn. */
  private readonly cooldowns: CooldownSource;
  private readonly holds: HeldRepairs;
  private readonly dead = new DeadInstanceCensus();
  private readonly recorder: StepRecorder;

  constructor(
    @inject(PROVIDERS) private readonly providers: ProviderSet,
    @inject(VERDICTS) private readonly verdicts: VerdictBoard,
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(METRICS_REGISTRY) registry: Registry,
    @inject(LEASE_BOOK) book: LeaseBook,
  ) {
    this.credentials = new ManagedCredentials(settings.credentialsKey);
    this.cooldowns = cooldownSource(book.store);
    this.budget = new ReplacementBudget(settings.maxUnavailable);
    this.holds = new HeldRepairs(registry);
    this.recorder = new StepRecorder({ budget: this.budget, holds: this.holds, verdicts }, registry);
  }

  /** The autopilot's clock: the system's, or the tests' (settings.autopilotClock). */
  private now(): Date {
    return this.settings.autopilotClock?.() ?? new Date();
  }

  /**
   * Whether an Unhealthy proxy's repair may go ahead now (repair-hold.ts), from the direct
   * checks and the cache's counts per probe URL and namespace (those whose target fails directly left out).
   */
  private repairHold(ctx: HandlerContext<Proxy>): RepairHold {
    const proxy = ctx.object;
    const provider = proxy.spec.provider ?? '';
    const probeURL = proxy.spec.healthCheck.probeURL;
    const target = (url: string) => this.verdicts.target(url);
    const namespace = proxy.metadata.namespace ?? '';
    const shares = sharesFor(
      this.budget.unhealthyByProbeURL(provider, ctx.cache),
      probeURL,
      target,
      namespace,
    );
    const decision = repairHold({
      provider,
      namespace,
      probeURL,
      target: target(probeURL),
      ...shares,
      maxUnhealthyPercent: this.settings.repairHoldUnhealthyPercent,
    });
    return this.holds.afterLift(
      proxyKey(proxy),
      decision,
      this.now().getTime(),
      unhealthyGrace(proxy, this.settings.replaceUnhealthyAfterSeconds),
    );
  }

  /** Why the proxy is due a rotation on bans (ban-rotation.ts); a book that cannot answer is "not due". */
  private bansDue(ctx: HandlerContext<Proxy>): Promise<string | undefined> {
    return readBansDue(
      this.cooldowns,
      ctx.object,
      proxyKey(ctx.object),
      this.settings.book.cooldownSeconds,
      (err) =>
        ctx.logger.debug(
          { err: err.message },
          'the lease book cannot say the cooldowns; no rotation on bans now',
        ),
    );
  }

  @onCreate()
  @onUpdate()
  @onResume()
  async reconcile(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    const proxy = ctx.object;
    const verdict = this.verdicts.get(proxyKey(proxy), proxyAddress(proxy));
    const bansDue = await this.bansDue(ctx);
    const autopilot = () => autopilotPolicy(proxy, this.settings, this.now(), bansDue);
    if (proxy.spec.mode === 'External') return this.apply(ctx, externalStep(proxy, verdict, autopilot()));
    const provider = this.providers.get(proxy.spec.provider ?? '');
    if (!provider) {
      return this.apply(
        ctx,
        unknownProviderStep({ proxy, verdict, configured: this.providers.names(), deleting: false }),
      );
    }

    const ci = resolveCloudInit(proxy, (ns, name) =>
      ctx.cache.get<SecretLike & { metadata: { name: string } }>(CLOUD_INIT_SECRETS, ns, name),
    );
    const creds = await this.credentials.resolve(ctx);
    // Nothing else this run: acting now and again on the Secret's own watch event would
    // retry a failed create at once (cutting a quota back-off short).
    if ('generated' in creds) return { requeueAfter: 1 };
    const key = await this.settings.credentialsKey();
    const revision =
      ci.ok && creds.ok
        ? desiredRevision(proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION], {
            keyed: specHash(proxy.spec, ci.content, creds.credentials, key),
            legacy: legacySpecHash(proxy.spec, ci.content, creds.credentials),
          })
        : undefined;
    const desiredHash = revision?.hash;
    if (creds.ok && revision?.rewrite !== undefined && proxy.status?.providerID) {
      // Recorded unkeyed by an earlier version and unchanged: rewritten keyed, with the
      // credentials (the Secret's: the unchanged revision covers them), and this run goes on
      // with the record it read, so nothing is replaced (credentials-digest.ts).
      await this.credentials.recordInUse(ctx, creds.credentials, {
        [SPEC_HASH_ANNOTATION]: revision.rewrite,
      });
      ctx.logger.info('spec hash and credentials tag rewritten in the keyed form');
    } else if (creds.ok && credentialsRecordMissing(proxy, desiredHash))
      // An instance made before its credentials were recorded: record them now, while they are
      // still the Secret's, so a later rotation keeps it serving.
      await this.credentials.recordInUse(ctx, creds.credentials, {});
    const made: InstanceMaterial = {
      cloudInit: ci.ok ? ci.content : undefined,
      credentials: creds.ok ? creds.credentials : undefined,
      revision: desiredHash,
    };
    let step: Step;
    let override: StatusOverride;
    try {
      const observation = await observeInstance(provider, proxy, {
        inventory: needsInventory(proxy, desiredHash),
        ownerID: this.settings.ownerID,
        signal: ctx.signal,
      });
      // Deleting an instance reported dead asks the provider how many more are (one listing).
      const deadHold =
        observation.kind === 'found' && isDead(observation.instance)
          ? await this.dead.hold(
              { name: proxy.spec.provider ?? '', api: provider, ownerID: this.settings.ownerID },
              observation.instance,
              proxy.metadata.namespace ?? '',
              ctx.cache,
              this.settings.repairHoldUnhealthyPercent,
              ctx.signal,
            )
          : undefined;
      // The budget is asked only for a replacement that needs a slot, the hold only for a repair
      // or an Unhealthy proxy's spec change.
      step = managedStep({
        proxy,
        desiredHash,
        cloudInitError: ci.ok ? undefined : ci.message,
        credentialsError: creds.ok ? undefined : creds.message,
        credentialsRotated: creds.ok && credentialsRotated(proxy, creds.credentials, key),
        observation,
        verdict,
        autopilot: autopilot(),
        slot: (kind) => this.askSlot(ctx, kind),
        repairHold: () => this.repairHold(ctx),
        deadHold,
        pollSeconds: this.settings.instancePollSeconds,
      });
      override = await actOnStep(ctx, provider, step, made, this.acting());
    } catch (err) {
      // Kubernetes API failures are the framework's to retry; only provider errors are ours.
      if (!isProviderError(err)) throw err;
      return this.apply(ctx, failed(proxy, verdict, err, false), {}, err);
    }
    return this.apply(ctx, step, override);
  }

  /**
   * Notices an instance deleted or stopped behind the operator's back. A requeue the state
   * machine asks for goes to the work queue (the timer's result); so does any failure, with
   * the object's backoff: drift detection must never switch itself off on one error.
   */
  @timer({ interval: (_p, self: ProxyController) => self.settings.driftCheckSeconds, jitter: 0.2 })
  async checkDrift(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    // A proxy that rotates on bans is looked at too: nothing else tells it of a new cooldown.
    if (!wantsDriftCheck(ctx.object) && !wantsBanCheck(ctx.object)) return;
    try {
      return await this.reconcile(ctx);
    } catch (err) {
      ctx.requeue({ backoff: true });
      throw err;
    }
  }

  @onDelete({ when: (p: Proxy) => p.spec.mode === 'Managed' })
  async cleanup(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    const proxy = ctx.object;
    const key = proxyKey(proxy);
    this.budget.release(key);
    this.credentials.forget(key);
    this.holds.forget(key);
    const provider = this.providers.get(proxy.spec.provider ?? '');
    if (!provider) {
      return this.apply(
        ctx,
        unknownProviderStep({ proxy, configured: this.providers.names(), deleting: true }),
      );
    }
    let step: Step;
    try {
      const observation = await observeInstance(provider, proxy, {
        inventory: deletionNeedsInventory(proxy),
        ownerID: this.settings.ownerID,
        signal: ctx.signal,
      });
      step = deletionStep(proxy, observation);
      const nothing = { cloudInit: undefined, credentials: undefined, revision: undefined };
      await actOnStep(ctx, provider, step, nothing, this.acting());
    } catch (err) {
      if (!isProviderError(err)) throw err;
      return this.apply(ctx, failed(proxy, undefined, err, true), {}, err);
    }
    return this.apply(ctx, step);
  }

  /** What acting on a step needs of this controller: the owner identity, the credentials' record. */
  private acting() {
    return { ownerID: this.settings.ownerID, recorder: this.credentials };
  }

  /** Asks for a --max-unavailable slot of this kind (granted: held until the proxy leaves Provisioning). */
  private askSlot(ctx: HandlerContext<Proxy>, kind: SlotKind): SlotAnswer {
    const proxy = ctx.object;
    const slot = this.budget.tryAcquire(
      proxyKey(proxy),
      proxy.spec.provider ?? '',
      ctx.cache,
      kind,
      (url) => this.verdicts.target(url).kind === 'unreachable',
    );
    if (!slot.granted)
      ctx.logger.debug(
        { inFlight: slot.inFlight, cap: slot.cap, failed: slot.failed, kind },
        'replacement waits for a slot (--max-unavailable)',
      );
    return slot;
  }

  /** Writes the step's status, posts its Events if that changed anything, logs, and says what next. */
  private async apply(
    ctx: HandlerContext<Proxy>,
    step: Step,
    override: StatusOverride = {},
    cause?: unknown,
  ): Promise<HandlerResult | void> {
    await this.recorder.record(ctx, step, override);
    return handlerOutcome(step.next, cause);
  }
}

import { Counter, Gauge, type Registry } from 'prom-client';
import { inject } from 'tsyringe';
import {
  controller,
  isStatus,
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
import { FINALIZER, CLOUD_INIT_SECRET_LABEL, SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';
import type { Instance, Provider } from '../providers/contract.js';
import { isNotFound, isProviderError, type ProviderError } from '../providers/errors.js';
import type { ProviderSet } from '../providers/registry.js';
import { proxiesUsingSecret, resolveCloudInit, type SecretLike } from './cloud-init.js';
import {
  CREDENTIALS_SECRETS,
  credentialsFingerprint,
  credentialsRotated,
  credentialsSecret,
  credentialsTag,
  CREDENTIALS_IN_USE_ANNOTATION,
  fillCloudInit,
  inUseSecret,
  generateCredentials,
  proxiesUsingCredentials,
  resolveCredentials,
} from './proxy-credentials.js';
import type { ProxyCredentials } from '../providers/contract.js';
import { CLOUD_INIT_SECRETS, PROXY_KIND, SECRET_KIND } from './kinds.js';
import { CREDENTIALS_SECRET_LABEL } from '../crds/proxy-credentials.js';
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
  type Autopilot,
  type HealthVerdict,
  type Observation,
  type Step,
} from './proxy-state-machine.js';
import { specHash } from './spec-hash.js';
import { writeStatus, type StatusOverride } from './proxy-status.js';
import { exitIPUpdate } from './exit-ip-status.js';
import { exitIPSource, probeTargetOf } from './probe-target.js';
import type { VerdictBoard } from './verdict-board.js';
import { proxyAddress, proxyKey } from './proxy-address.js';
import { holdsSlot, ReplacementBudget, type SlotAnswer, type SlotKind } from './replacement-budget.js';
import { holdAfterLift, repairHold, type RepairHold, type RepairHoldReason } from './repair-hold.js';
import type { HandlerSettings } from './settings.js';
import { HANDLER_SETTINGS, LEASE_BOOK, METRICS_REGISTRY, PROVIDERS, VERDICTS } from './tokens.js';
import { banRotation, cooldownSource, upSince, wantsBanCheck, type CooldownSource } from './ban-rotation.js';
import type { LeaseBook } from './lease-book.js';

function mapSecretToProxies(secret: SecretLike, cache: CacheReader) {
  return proxiesUsingSecret(secret, cache.list<Proxy>(PROXY_KIND)).map((p) => ({
    namespace: p.metadata.namespace,
    name: p.metadata.name,
  }));
}

function mapCredentialsToProxies(secret: SecretLike, cache: CacheReader) {
  return proxiesUsingCredentials(secret, cache.list<Proxy>(PROXY_KIND)).map((p) => ({
    namespace: p.metadata.namespace,
    name: p.metadata.name,
  }));
}

/** The credentials a Managed proxy's instance requires, or why they cannot be had. */
type Credentials =
  | { ok: true; credentials: ProxyCredentials }
  | { ok: false; message: string }
  /** Just generated: the Secret's watch event (or a short requeue) runs the reconcile again. */
  | { ok: false; generated: true };

/**
 * The Proxy reconciler: the imperative shell around the pure state machine
 * (proxy-state-machine.ts), which makes every status, Event and retry decision. This class
 * only observes (provider get/list), acts (create/delete, the spec-hash record) and writes.
 * Create, update and resume all run the same level-triggered state machine.
 */
@controller({ ...PROXY_KIND, finalizer: FINALIZER, maxConcurrentReconciles: 3 })
@watches({ ...SECRET_KIND, labelSelector: `${CLOUD_INIT_SECRET_LABEL}=true`, map: mapSecretToProxies })
@watches({ ...CREDENTIALS_SECRETS, map: mapCredentialsToProxies })
export class ProxyController {
  private readonly budget: ReplacementBudget;
  /** proxy_operator_replacements_total{provider,cause}: why proxies that served got new instances. */
  private readonly replacements: Counter<'provider' | 'cause'>;
  /**
   * Credentials this process generated whose Secret the cache does not show yet: the next
   * reconcile (often triggered by its own status write) uses them instead of meeting a 409.
   */
  private readonly generated = new Map<string, ProxyCredentials>();
  /** The lease book's cooldowns, for spec.rotation.whenCoolingDownOn. */
  private readonly cooldowns: CooldownSource;
  /** Proxies whose repair holds now, by key: proxy_operator_repairs_held counts them. */
  private readonly held = new Map<string, { provider: string; reason: RepairHoldReason }>();
  /** Held proxies whose shared cause ended, by key: when (ms); their grace restarts then. */
  private readonly lifted = new Map<string, number>();

  constructor(
    @inject(PROVIDERS) private readonly providers: ProviderSet,
    @inject(VERDICTS) private readonly verdicts: VerdictBoard,
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(METRICS_REGISTRY) registry: Registry,
    @inject(LEASE_BOOK) book: LeaseBook,
  ) {
    this.cooldowns = cooldownSource(book.store);
    this.budget = new ReplacementBudget(settings.maxUnavailable);
    this.replacements = new Counter({
      name: 'proxy_operator_replacements_total',
      help: 'Replacements of proxies that had served, by provider and cause (SpecChanged, InstanceDead, InstanceGone, Unhealthy, Rotation).',
      labelNames: ['provider', 'cause'],
      registers: [registry],
    });
    const held = this.held;
    new Gauge({
      name: 'proxy_operator_repairs_held',
      help: 'Unhealthy Managed proxies past their grace whose repair holds because the cause looks shared, by provider and reason (ProbeTargetUnreachable, ProbeTargetUnchecked, FleetUnhealthy).',
      labelNames: ['provider', 'reason'],
      registers: [registry],
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const { provider, reason } of held.values())
          counts.set(`${provider}\0${reason}`, (counts.get(`${provider}\0${reason}`) ?? 0) + 1);
        for (const [k, n] of counts) {
          const [provider, reason] = k.split('\0');
          this.set({ provider, reason }, n);
        }
      },
    });
  }

  /** Whether an Unhealthy proxy's repair may go ahead now (repair-hold.ts), from the cache and the direct check. */
  private repairHold(ctx: HandlerContext<Proxy>): RepairHold {
    const proxy = ctx.object;
    const provider = proxy.spec.provider ?? '';
    const share = this.budget.unhealthyShare(provider, ctx.cache);
    const key = proxyKey(proxy);
    const decision = repairHold({
      provider,
      probeURL: proxy.spec.healthCheck.probeURL,
      target: this.verdicts.target(proxy.spec.healthCheck.probeURL),
      unhealthy: share.unhealthy,
      total: share.total,
      maxUnhealthyPercent: this.settings.repairHoldUnhealthyPercent,
    });
    const { hold, liftedAt } = holdAfterLift(
      decision,
      { reason: this.held.get(key)?.reason, liftedAt: this.lifted.get(key) },
      (this.settings.autopilotClock?.() ?? new Date()).getTime(),
      unhealthyGrace(proxy, this.settings.replaceUnhealthyAfterSeconds),
    );
    if (liftedAt === undefined) this.lifted.delete(key);
    else this.lifted.set(key, liftedAt);
    return hold;
  }

  /** The clock and the resolved policy for the pure decisions. */
  private autopilot(proxy: Proxy, bansDue?: string): Autopilot {
    return {
      now: this.settings.autopilotClock?.() ?? new Date(),
      unhealthyAfterSeconds: unhealthyGrace(proxy, this.settings.replaceUnhealthyAfterSeconds),
      maxAgeSeconds: proxy.spec.rotation?.maxAgeSeconds ?? 0,
      drainSeconds: this.settings.rotationDrainSeconds,
      rotatesOnBans: proxy.spec.rotation?.whenCoolingDownOn !== undefined,
      bansDue,
    };
  }

  /** Why the proxy is due a rotation on bans (ban-rotation.ts); a book that cannot answer is "not due". */
  private async bansDue(ctx: HandlerContext<Proxy>): Promise<string | undefined> {
    const threshold = ctx.object.spec.rotation?.whenCoolingDownOn;
    if (threshold === undefined) return undefined;
    try {
      const reading = await this.cooldowns.cooldowns(proxyKey(ctx.object));
      const decision = banRotation(
        threshold,
        reading,
        upSince(ctx.object),
        this.settings.book.cooldownSeconds,
      );
      return decision.kind === 'due' ? decision.why : undefined;
    } catch (err) {
      ctx.logger.debug(
        { err: (err as Error).message },
        'the lease book cannot say the cooldowns; no rotation on bans now',
      );
      return undefined;
    }
  }

  @onCreate()
  @onUpdate()
  @onResume()
  async reconcile(ctx: HandlerContext<Proxy>): Promise<HandlerResult | void> {
    const proxy = ctx.object;
    const verdict = this.verdicts.get(proxyKey(proxy), proxyAddress(proxy));
    const bansDue = await this.bansDue(ctx);
    if (proxy.spec.mode === 'External')
      return this.apply(ctx, externalStep(proxy, verdict, this.autopilot(proxy, bansDue)));
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
    const creds = await this.credentials(ctx);
    // Nothing else this run: acting now and again on the Secret's own watch event would
    // retry a failed create at once (cutting a quota back-off short).
    if ('generated' in creds) return { requeueAfter: 1 };
    const desiredHash =
      ci.ok && creds.ok
        ? specHash(proxy.spec, ci.content, credentialsFingerprint(creds.credentials))
        : undefined;
    // An instance made before its credentials were recorded: record them now, while they are
    // still the Secret's (the revision agrees), so a later rotation keeps it serving.
    const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
    if (
      creds.ok &&
      desiredHash !== undefined &&
      recorded === desiredHash &&
      proxy.status?.providerID &&
      proxy.metadata.annotations?.[CREDENTIALS_IN_USE_ANNOTATION] === undefined
    )
      await this.recordCredentialsInUse(ctx, creds.credentials, {});
    let step: Step;
    let override: StatusOverride;
    try {
      const observation = await this.observe(provider, proxy, needsInventory(proxy, desiredHash), ctx.signal);
      const inputs = {
        proxy,
        desiredHash,
        cloudInitError: ci.ok ? undefined : ci.message,
        credentialsError: creds.ok ? undefined : creds.message,
        credentialsRotated: creds.ok && credentialsRotated(proxy, creds.credentials),
        observation,
        verdict,
        autopilot: this.autopilot(proxy, bansDue),
      };
      // The budget is asked only for a replacement that needs a slot, the hold only for a repair.
      step = managedStep({
        ...inputs,
        slot: (kind) => this.askSlot(ctx, kind),
        repairHold: () => this.repairHold(ctx),
      });
      override = await this.act(
        ctx,
        provider,
        step,
        ci.ok ? ci.content : undefined,
        creds.ok ? creds.credentials : undefined,
        desiredHash,
      );
    } catch (err) {
      // Kubernetes API failures are the framework's to retry; only provider errors are ours.
      if (!isProviderError(err)) throw err;
      return this.apply(ctx, this.failed(proxy, verdict, err, false), {}, err);
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
    this.budget.release(proxyKey(proxy));
    this.generated.delete(proxyKey(proxy));
    this.held.delete(proxyKey(proxy));
    this.lifted.delete(proxyKey(proxy));
    const provider = this.providers.get(proxy.spec.provider ?? '');
    if (!provider) {
      return this.apply(
        ctx,
        unknownProviderStep({ proxy, configured: this.providers.names(), deleting: true }),
      );
    }
    let step: Step;
    try {
      const observation = await this.observe(provider, proxy, deletionNeedsInventory(proxy), ctx.signal);
      step = deletionStep(proxy, observation);
      await this.act(ctx, provider, step, undefined, undefined, undefined);
    } catch (err) {
      if (!isProviderError(err)) throw err;
      return this.apply(ctx, this.failed(proxy, undefined, err, true), {}, err);
    }
    return this.apply(ctx, step);
  }

  /**
   * The Managed proxy's credentials from its Secret; a missing Secret is generated (owned by
   * the Proxy, so it goes with it), and its credentials are used before the cache shows it.
   */
  private async credentials(ctx: HandlerContext<Proxy>): Promise<Credentials> {
    const proxy = ctx.object;
    const found = resolveCredentials(proxy, (ns, name) =>
      ctx.cache.get<SecretLike & { metadata: { name: string } }>(CREDENTIALS_SECRETS, ns, name),
    );
    const key = proxyKey(proxy);
    if (found.kind !== 'missing') this.generated.delete(key);
    if (found.kind === 'ok') return { ok: true, credentials: found.credentials };
    if (found.kind === 'unavailable') return { ok: false, message: found.message };
    if (found.kind === 'none') return { ok: false, message: 'a Managed proxy always has credentials' };
    const pending = this.generated.get(key);
    if (pending) return { ok: true, credentials: pending };
    const credentials = generateCredentials();
    try {
      await ctx.createOwned(SECRET_KIND, credentialsSecret(proxy, credentials));
      this.generated.set(key, credentials);
      ctx.logger.info({ secret: found.secretName }, 'generated the proxy credentials Secret');
      return { ok: false, generated: true };
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
      return {
        ok: false,
        message: `credentials Secret ${proxy.metadata.namespace}/${found.secretName} exists but the operator cannot see it: label it ${CREDENTIALS_SECRET_LABEL}: "true", or delete it to have new credentials generated`,
      };
    }
  }

  /**
   * Copies `credentials` into their own immutable Secret (owned by the Proxy) and records their
   * tag beside `annotations`: what the instance about to exist requires (proxy-credentials.ts).
   */
  private async recordCredentialsInUse(
    ctx: HandlerContext<Proxy>,
    credentials: ProxyCredentials,
    annotations: Record<string, string>,
  ): Promise<void> {
    try {
      await ctx.createOwned(SECRET_KIND, inUseSecret(ctx.object, credentials));
    } catch (err) {
      // Made by an earlier run (or an earlier rotation back to the same credentials).
      if (!isStatus(err, 409)) throw err;
    }
    await ctx.patchMetadata({
      annotations: { ...annotations, [CREDENTIALS_IN_USE_ANNOTATION]: credentialsTag(credentials) },
    });
  }

  private failed(
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

  /** Asks for a --max-unavailable slot of this kind (granted: held until the proxy leaves Provisioning). */
  private askSlot(ctx: HandlerContext<Proxy>, kind: SlotKind): SlotAnswer {
    const proxy = ctx.object;
    const slot = this.budget.tryAcquire(proxyKey(proxy), proxy.spec.provider ?? '', ctx.cache, kind);
    if (!slot.granted)
      ctx.logger.debug(
        { inFlight: slot.inFlight, cap: slot.cap, failed: slot.failed, kind },
        'replacement waits for a slot (--max-unavailable)',
      );
    return slot;
  }

  private async observe(
    provider: Provider,
    proxy: Proxy,
    inventory: boolean,
    signal: AbortSignal,
  ): Promise<Observation> {
    const providerID = proxy.status?.providerID;
    if (!providerID) {
      return inventory
        ? { kind: 'unprovisioned', strays: await this.strays(provider, proxy, signal) }
        : { kind: 'unprovisioned' };
    }
    try {
      return { kind: 'found', instance: await provider.get(providerID, signal) };
    } catch (err) {
      if (isNotFound(err)) return { kind: 'not-found' };
      throw err;
    }
  }

  /** This Proxy's instances at the provider (any revision). */
  private async strays(provider: Provider, proxy: Proxy, signal: AbortSignal): Promise<Instance[]> {
    const uid = proxy.metadata.uid ?? '';
    return (await provider.listByTag(this.settings.ownerID, signal)).filter((i) => i.uid === uid);
  }

  private async act(
    ctx: HandlerContext<Proxy>,
    provider: Provider,
    step: Step,
    cloudInit: string | undefined,
    credentials: ProxyCredentials | undefined,
    revision: string | undefined,
  ): Promise<StatusOverride> {
    const proxy = ctx.object;
    const action = step.action;
    if (action.type === 'delete' || action.type === 'create') {
      const ids = action.type === 'delete' ? action.providerIDs : action.staleInstances;
      for (const id of ids) await provider.delete(id, ctx.signal);
    }
    // The record of what is about to exist, written before it can exist: the revision and the
    // credentials it requires (their copy first, so the record never names a missing one).
    if (step.annotateHash) {
      const hash = { [SPEC_HASH_ANNOTATION]: step.annotateHash };
      if (credentials) await this.recordCredentialsInUse(ctx, credentials, hash);
      else await ctx.patchMetadata({ annotations: hash });
    }
    if (action.type !== 'create') return {};
    const id = await provider.create(
      {
        uid: proxy.metadata.uid ?? '',
        revision,
        proxy: `${proxy.metadata.namespace}/${proxy.metadata.name}`,
        namespace: proxy.metadata.namespace ?? '',
        owner: this.settings.ownerID,
        port: proxy.spec.port,
        // The placeholders are filled only here: the filled text is never stored or logged.
        cloudInit: cloudInit === undefined ? undefined : fillCloudInit(cloudInit, credentials),
        ...(credentials ? { credentials } : {}),
        placement: proxy.spec.placement ?? {},
      },
      ctx.signal,
    );
    ctx.logger.info({ provider: proxy.spec.provider, providerID: id }, 'instance creation submitted');
    return { providerID: id };
  }

  /** Writes the step's status, posts its Events if that changed anything, logs, and says what next. */
  private async apply(
    ctx: HandlerContext<Proxy>,
    step: Step,
    override: StatusOverride = {},
    cause?: unknown,
  ): Promise<HandlerResult | void> {
    await this.record(ctx, step, override);
    return this.continue(step, cause);
  }

  private async record(ctx: HandlerContext<Proxy>, step: Step, override: StatusOverride): Promise<void> {
    const proxy = ctx.object;
    if (step.repairHeld)
      this.held.set(proxyKey(proxy), { provider: proxy.spec.provider ?? '', reason: step.repairHeld });
    else {
      this.held.delete(proxyKey(proxy));
      this.lifted.delete(proxyKey(proxy));
    }
    const exitIP = this.exitIPUpdate(proxy, step, override);
    let changed = true;
    if (step.status) {
      // A drain keeps its grant until the instance is replaced, on every run of the drain.
      if (!holdsSlot(proxy.status?.replacement, step.status)) this.budget.release(proxyKey(proxy));
      changed = await writeStatus(ctx, step.status, {
        ...override,
        ...(exitIP ? { exitIP: exitIP.exitIP } : {}),
      });
    }
    if (changed && step.startsReplacement)
      this.replacements.inc({ provider: proxy.spec.provider ?? '', cause: step.startsReplacement });
    // A retry that changes nothing repeats no Event and no info log; errors are logged every time.
    for (const e of changed ? step.events : []) {
      if (e.type === 'Warning') await ctx.events.warning(e.reason, e.message);
      else await ctx.events.normal(e.reason, e.message);
    }
    for (const l of step.logs)
      if (changed || l.level === 'error') ctx.logger[l.level](l.fields ?? {}, l.message);
    if (!exitIP) return;
    // With no status in the step, the exit IP is a patch of its own; it compares against the
    // status the step's own write returned (see StatusWriter).
    const wrote = step.status ? changed : await ctx.status.patch({ exitIP: exitIP.exitIP });
    if (wrote && exitIP.event) {
      await ctx.events.normal(exitIP.event.reason, exitIP.event.message);
      ctx.logger.info({ exitIP: exitIP.exitIP }, exitIP.event.message);
    }
  }

  /**
   * status.exitIP is the health runner's reading through what serves the proxy once the step
   * is written (its instance and address), kept apart from the state machine's decision.
   */
  private exitIPUpdate(proxy: Proxy, step: Step, override: StatusOverride) {
    const providerID =
      override.providerID ??
      (step.status?.providerID === undefined ? proxy.status?.providerID : step.status.providerID);
    const ip = step.status?.ip === undefined ? proxy.status?.ip : step.status.ip;
    const after = {
      ...proxy,
      status: { ...proxy.status, providerID: providerID ?? undefined, ip: ip ?? undefined },
    };
    const target = probeTargetOf(after);
    const observed = target ? this.verdicts.exitIP(proxyKey(proxy), exitIPSource(target)) : undefined;
    return exitIPUpdate(proxy, { providerID, ip }, observed);
  }

  private continue(step: Step, cause?: unknown): HandlerResult | void {
    switch (step.next.kind) {
      case 'steady':
        return;
      case 'requeue':
        return { requeueAfter: step.next.seconds };
      case 'backoff':
        // The framework's per-object exponential backoff.
        throw cause instanceof Error ? cause : new Error(String(cause ?? 'retrying'));
      case 'permanent':
        throw new PermanentError(step.next.message);
    }
  }
}

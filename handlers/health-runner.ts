import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { background, daemon, type OperatorContext } from '../framework/index.js';
import { checkDirectly, HealthEngine, type ProbeTarget } from '../health/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { exitIPSource, probeTargetOf, sameTarget } from './probe-target.js';
import type { SecretLike } from './cloud-init.js';
import { CREDENTIALS_SECRETS, servingCredentials } from './proxy-credentials.js';
import { probeTargetProblem } from './probe-target-problem.js';
import { followBookRechecks } from './book-rechecks.js';
import type { HealthObservation } from '../book/lease-store.js';
import type { LeaseBook } from './lease-book.js';
import type { HandlerSettings } from './settings.js';
import { HANDLER_SETTINGS, LEASE_BOOK, METRICS_REGISTRY, ROOT_LOGGER, VERDICTS } from './tokens.js';
import type { VerdictBoard } from './verdict-board.js';
import type { TargetReading } from './repair-hold.js';
import { endpointCheck, type EndpointCheck } from '../providers/endpoint-ranges.js';

/**
 * Leader-only: keeps the probe engine's targets in step with the Proxy cache and hands
 * status-affecting verdicts to the reconciler (the single writer of Proxy status). It is
 * also the seam between the engine and the lease book: the book's re-probe requests (from
 * unreachable reports, on any replica sharing the book) become rechecks, and the engine's
 * verdicts and recheck passes reach the book at once, not only through the Proxy status.
 */
@background()
export class HealthRunner {
  private readonly engine: HealthEngine;
  private readonly targets = new Map<string, ProbeTarget>();
  /** Targets that cannot be probed, by key, as JSON: reported once, not on every sync. */
  private readonly invalid = new Map<string, string>();
  /** Direct checks of the probe URLs: when each is next due, and whether one is in flight. */
  private readonly direct = new Map<string, { dueAt: number; inFlight: boolean }>();
  /** Where External endpoints may be (the providers config's `external:` block). */
  private readonly endpoints: EndpointCheck;

  constructor(
    @inject(VERDICTS) private readonly board: VerdictBoard,
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(LEASE_BOOK) private readonly book: LeaseBook,
    @inject(METRICS_REGISTRY) registry: Registry,
    @inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.endpoints = endpointCheck(settings.externalEndpoints);
    // Built once: its metrics register in the registry once, across leadership changes.
    this.engine = new HealthEngine({
      logger: logger.child({ component: 'health' }),
      registry,
      concurrency: settings.healthConcurrency,
      tls: settings.probeCA ? { ca: settings.probeCA } : undefined,
      recheckIntervalMillis: settings.recheckIntervalMillis,
      exitIPPolicy: { allowNonPublic: settings.exitIPAllowNonPublic },
      // Each address a guarded (External) endpoint's name resolves to, before connecting.
      addressGuard: (address) => this.endpoints(address)?.message,
      ...(settings.exitIPRefreshMillis === undefined
        ? {}
        : { exitIPRefreshMillis: settings.exitIPRefreshMillis }),
    });
  }

  @daemon()
  async run(ctx: OperatorContext): Promise<void> {
    // A new term starts clean: verdicts of an earlier term predate whatever changed while
    // another replica led (a proxy that died would be written Ready again). Synchronous,
    // before the first await, so before the new term's resync reconciles anything.
    this.board.clear();
    this.invalid.clear();
    this.direct.clear();
    const unsubscribe = this.engine.onTransition((key, verdict) => {
      const target = this.targets.get(key);
      if (!target) return;
      const address = `${target.host}:${target.port}`;
      this.board.set(key, address, verdict);
      this.tellBook(ctx, key, { kind: verdict.healthy ? 'up' : 'down', address });
      const slash = key.indexOf('/');
      ctx.trigger(PROXY_KIND, key.slice(0, slash), key.slice(slash + 1));
    });
    const stopExitIPs = this.engine.onExitIP((key, exitIP) => {
      const target = this.targets.get(key);
      if (!target) return;
      this.board.setExitIP(key, exitIPSource(target), exitIP);
      const slash = key.indexOf('/');
      ctx.trigger(PROXY_KIND, key.slice(0, slash), key.slice(slash + 1));
    });
    const stopBook = followBookRechecks({
      engine: this.engine,
      store: this.book.store,
      probedAddress: (key) => {
        const target = this.targets.get(key);
        return target && `${target.host}:${target.port}`;
      },
      // A proxy the cache has and the last sync did not yet see: sync now rather than drop it.
      unknown: () => this.sync(ctx),
      tell: (key, observation) => this.tellBook(ctx, key, observation),
    });
    this.engine.start();
    try {
      while (!ctx.signal.aborted) {
        this.sync(ctx);
        this.checkTargetsDirectly(ctx);
        await ctx.sleep(this.settings.healthSyncSeconds * 1000);
      }
    } finally {
      stopBook();
      stopExitIPs();
      unsubscribe();
      for (const key of this.targets.keys()) this.engine.remove(key);
      this.targets.clear();
      this.direct.clear();
      await this.engine.stop();
    }
  }

  /**
   * Fetches every probe URL the proxies use directly, without a proxy, as often as the most
   * frequent of their probes: the reference the autopilot's repair hold reads (repair-hold.ts).
   * One check per URL, however many proxies share it.
   */
  private checkTargetsDirectly(ctx: OperatorContext): void {
    const byURL = new Map<string, { interval: number; timeout: number; codes: Set<number> }>();
    for (const t of this.targets.values()) {
      const known = byURL.get(t.probeURL);
      if (!known)
        byURL.set(t.probeURL, {
          interval: t.intervalSeconds,
          timeout: t.timeoutSeconds,
          codes: new Set(t.expectedStatusCodes),
        });
      else {
        known.interval = Math.min(known.interval, t.intervalSeconds);
        known.timeout = Math.max(known.timeout, t.timeoutSeconds);
        for (const c of t.expectedStatusCodes) known.codes.add(c);
      }
    }
    for (const url of [...this.direct.keys(), ...this.board.targetURLs()]) {
      if (byURL.has(url)) continue;
      this.direct.delete(url);
      this.board.deleteTarget(url);
    }
    const now = Date.now();
    for (const [url, how] of byURL) {
      const state = this.direct.get(url) ?? { dueAt: 0, inFlight: false };
      this.direct.set(url, state);
      if (state.inFlight || now < state.dueAt) continue;
      state.inFlight = true;
      void checkDirectly(url, {
        timeoutSeconds: how.timeout,
        expectedStatusCodes: [...how.codes],
        ca: this.settings.probeCA,
        signal: ctx.signal,
        // A probe URL is anyone's who may create a Proxy: never fetched inside from here.
        guard: (host) => this.endpoints(host)?.message,
      }).then((result) => {
        state.inFlight = false;
        state.dueAt = Date.now() + how.interval * 1000;
        if (ctx.signal.aborted || this.direct.get(url) !== state) return;
        const before = this.board.target(url);
        const reading: TargetReading = result.reachable
          ? { kind: 'reachable' }
          : { kind: result.refused ? 'refused' : 'unreachable', message: result.message };
        this.board.setTarget(url, reading);
        if (before.kind !== reading.kind)
          ctx.logger.info(
            {
              probeURL: url,
              reachable: result.reachable,
              ...(result.reachable ? {} : { refused: result.refused === true, detail: result.message }),
            },
            result.reachable || !result.refused
              ? 'probe target checked directly (no proxy)'
              : 'probe target not checked directly: it is inside (providers config external:)',
          );
      });
    }
  }

  private tellBook(ctx: OperatorContext, key: string, observation: HealthObservation): void {
    this.book.store.observeHealth(key, observation).catch((err: unknown) => {
      // The status still carries the verdict; only the head start is lost.
      ctx.logger.error(
        { err, proxy: key, observation: observation.kind },
        'could not hand a health verdict to the lease book',
      );
    });
  }

  /** Level-triggered: diff the cache against the engine's targets. Cheap in memory. */
  private sync(ctx: OperatorContext): void {
    const seen = new Set<string>();
    const lookup = (ns: string, name: string) =>
      ctx.cache.get<SecretLike & { metadata: { name: string } }>(CREDENTIALS_SECRETS, ns, name);
    for (const proxy of ctx.cache.list<Proxy>(PROXY_KIND)) {
      // Read at every sync: a rotated Secret reaches the probes within healthSyncSeconds.
      // The credentials the instance requires: a rotated Managed proxy keeps its old ones until
      // it is replaced; an External proxy's reach the probes within healthSyncSeconds.
      const creds = servingCredentials(proxy, lookup);
      const target = probeTargetOf(proxy, creds.kind === 'ok' ? creds.credentials : undefined);
      if (!target) continue;
      seen.add(target.key);
      // Held in memory only, to report an unusable target once; never logged.
      const json = JSON.stringify([target, creds.kind === 'unavailable' ? creds.message : '']);
      if (creds.kind === 'unavailable') {
        if (this.invalid.get(target.key) !== json)
          this.reportInvalid(ctx, target, json, creds.message, 'CredentialsUnavailable');
        continue;
      }
      const known = this.targets.get(target.key);
      if (known && sameTarget(known, target)) continue;
      if (this.invalid.get(target.key) === json) continue;
      // An External endpoint where the providers config does not allow it is never probed.
      const refused = target.guarded ? this.endpoints(target.host) : undefined;
      if (refused) {
        this.reportInvalid(ctx, target, json, `endpoint refused: ${refused.message}`, 'EndpointRefused');
        continue;
      }
      let problem = probeTargetProblem(target);
      if (!problem) {
        try {
          this.engine.upsert(target);
          this.targets.set(target.key, target);
          if (this.invalid.delete(target.key)) this.board.delete(target.key);
        } catch (err) {
          problem = (err as Error).message;
        }
      }
      if (problem) this.reportInvalid(ctx, target, json, problem);
    }
    for (const key of new Set([...this.targets.keys(), ...this.invalid.keys()])) {
      if (seen.has(key)) continue;
      this.engine.remove(key);
      this.targets.delete(key);
      this.invalid.delete(key);
      this.board.delete(key);
    }
  }

  /** Once per target: a verdict the reconciler turns into Healthy=False/<reason> and one Event. */
  private reportInvalid(
    ctx: OperatorContext,
    target: ProbeTarget,
    json: string,
    problem: string,
    reason: 'InvalidProbeTarget' | 'CredentialsUnavailable' | 'EndpointRefused' = 'InvalidProbeTarget',
  ): void {
    this.invalid.set(target.key, json);
    this.engine.remove(target.key);
    this.targets.delete(target.key);
    ctx.logger.warn({ proxy: target.key, err: problem, reason }, 'cannot probe proxy');
    this.board.set(target.key, `${target.host}:${target.port}`, {
      healthy: false,
      latencyMillis: 0,
      reason,
      message: problem,
      checkedAt: new Date(),
    });
    const slash = target.key.indexOf('/');
    ctx.trigger(PROXY_KIND, target.key.slice(0, slash), target.key.slice(slash + 1));
  }
}

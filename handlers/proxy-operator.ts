import 'reflect-metadata';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { container as rootContainer } from 'tsyringe';
import { Operator } from '../framework/index.js';
import type { ProviderSet } from '../providers/registry.js';
import { createClientTokens, type ClientTokens } from './client-tokens.js';
import { DiscoveryRunner } from './discovery-runner.js';
import { HealthRunner } from './health-runner.js';
import { createLeaseBook, memoryLeaseStore, type LeaseStoreFactory } from './lease-book.js';
import { OrphanSweep } from './orphan-sweep.js';
import { ProviderShutdown } from './provider-shutdown.js';
import { ProxyController } from './proxy-controller.js';
import { PROXY_KIND } from './kinds.js';
import { CREDENTIALS_SECRETS } from './proxy-credentials.js';
import { registerProxyGauge } from './proxy-gauge.js';
import { registerPoolGauges } from './pool-gauges.js';
import { registerBookMetrics } from '../book/book-metrics.js';
import { TargetCooldownMetrics } from '../discovery/target-cooldown-metrics.js';
import { BookTurns } from '../discovery/book-turns.js';
import { DEFAULT_TENANT_QUOTAS, TenantLedger } from '../book/tenant-quotas.js';
import { bookWaitObserver } from '../discovery/book-wait-metrics.js';
import { DEFAULT_FAIR_SHARE_LIMITS, fairShareLimits } from '../discovery/fair-share.js';
import type { HandlerSettings } from './settings.js';
import {
  CLIENT_TOKENS,
  TARGET_COOLDOWNS,
  BOOK_TURNS,
  TENANT_LEDGER,
  HANDLER_SETTINGS,
  LEASE_BOOK,
  METRICS_REGISTRY,
  PROVIDERS,
  ROOT_LOGGER,
  VERDICTS,
} from './tokens.js';
import { VerdictBoard } from './verdict-board.js';

/** Every handler class the proxy operator runs (ProviderShutdown last: its cleanup closes the providers). */
export const PROXY_HANDLERS = [ProxyController, HealthRunner, DiscoveryRunner, OrphanSweep, ProviderShutdown];

export interface ProxyOperatorOptions {
  kubeConfig: KubeConfig;
  providers: ProviderSet;
  settings: HandlerSettings;
  logger: Logger;
  registry: Registry;
  leaderElection:
    { namespace: string; name: string; identity?: string; leaseDurationSeconds?: number } | false;
  probeAddress?: { host: string; port: number };
  /** Restrict the handler classes (tests run only the ones they exercise). */
  handlers?: Array<new (...args: never[]) => unknown>;
  shutdownGraceSeconds?: number;
  /** Watch Proxies (and Secrets) in this namespace only; all namespaces when unset. */
  namespace?: string;
  /** The lease store; the in-memory one (on settings.book) when unset. */
  leaseStore?: LeaseStoreFactory;
  /**
   * The client tokens both doors read (the entry point loads the tokens file once, at start-up);
   * built from settings.discovery when unset.
   */
  clientTokens?: ClientTokens;
}

/** Wires providers, settings and the handler classes into one framework Operator. */
export function createProxyOperator(options: ProxyOperatorOptions): Operator {
  // A child container per operator: two operators in one process (tests) never share state.
  const container = rootContainer.createChildContainer();
  container.register(PROVIDERS, { useValue: options.providers });
  // The sweep's namespace scope is the informers' own: one setting, never two that disagree.
  container.register(HANDLER_SETTINGS, {
    useValue: { ...options.settings, watchNamespace: options.namespace } satisfies HandlerSettings,
  });
  container.register(METRICS_REGISTRY, { useValue: options.registry });
  container.register(ROOT_LOGGER, { useValue: options.logger });
  container.register(VERDICTS, { useValue: new VerdictBoard() });
  const storeFactory = options.leaseStore ?? memoryLeaseStore(options.settings.book);
  const book = createLeaseBook(storeFactory, options.logger.child({ component: 'discovery' }));
  container.register(LEASE_BOOK, { useValue: book });
  // One source of tokens per process, like the book: the API and the gateway never disagree
  // on who may come in, and the tokens file has one watcher and one set of metrics.
  const clientTokens =
    options.clientTokens ??
    createClientTokens(options.settings.discovery, { registry: options.registry, logger: options.logger });
  // A shared book counts wrong tokens per address for every replica: a guesser gets one burst
  // across them, not one per replica (the process's own count stays, for when Redis is away).
  const { store } = book;
  if (store.countFailedAuth !== undefined)
    clientTokens.failedAuth.share((address, limits) =>
      store.countFailedAuth!(address, limits.ratePerSecond, limits.burst),
    );
  container.register(CLIENT_TOKENS, { useValue: clientTokens });
  // One count of bans by target for both doors: a target keeps one label (its pseudonym) and
  // each ban is counted once, whether a client reported it to the API or the gateway saw it.
  container.register(TARGET_COOLDOWNS, {
    useValue: new TargetCooldownMetrics(
      options.registry,
      options.settings.discovery.metricsTargetNames === true,
    ),
  });
  // One fair share of the book per process: the API's and the gateway's calls take turns in it.
  container.register(BOOK_TURNS, {
    useValue: new BookTurns(
      fairShareLimits(options.settings.discovery.fairShare ?? DEFAULT_FAIR_SHARE_LIMITS),
      bookWaitObserver(options.registry),
    ),
  });
  // One ledger of per-token quotas per process: a token's leases, sessions and cooldowns
  // count alike whether taken through the API or the gateway.
  const { sessionQuota, leaseQuota, cooldownQuota } = options.settings.discovery;
  const ledger = new TenantLedger(
    {
      ...DEFAULT_TENANT_QUOTAS,
      ...(sessionQuota === undefined ? {} : { sessions: sessionQuota }),
      ...(leaseQuota === undefined ? {} : { leases: leaseQuota }),
      ...(cooldownQuota === undefined ? {} : { cooldowns: cooldownQuota }),
    },
    options.settings.book.sessionIdleSeconds * 1000,
  );
  const ledgerSweep = setInterval(() => ledger.sweep(Date.now()), 60_000);
  ledgerSweep.unref();
  container.register(TENANT_LEDGER, { useValue: ledger });
  const operator = new Operator({
    kubeConfig: options.kubeConfig,
    container,
    logger: options.logger,
    registry: options.registry,
    handlers: options.handlers ?? PROXY_HANDLERS,
    leaderElection: options.leaderElection,
    probeAddress: options.probeAddress,
    stateAnnotationPrefix: 'crawl.example.com',
    shutdownGraceSeconds: options.shutdownGraceSeconds,
    namespace: options.namespace,
    // The discovery catalog reads Proxies even in a process without the controller.
    // ... and the credentials Secrets it hands out with every lease.
    cacheKinds: [PROXY_KIND, CREDENTIALS_SECRETS],
  });
  // The fleet and the book are the same for every replica: one replica (the acting leader)
  // exports their figures, so dashboards and alerts may sum across replicas.
  const leads = (): boolean => operator.actsAsLeader();
  registerProxyGauge(options.registry, () => operator.cache, leads);
  registerPoolGauges(options.registry, () => operator.cache, leads);
  registerBookMetrics(options.registry, book.store, leads);
  return operator;
}

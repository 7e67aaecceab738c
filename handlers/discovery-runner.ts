import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { background, daemon, onCleanup, onStartup, type OperatorContext } from '../framework/index.js';
import { createDiscoveryApp } from '../discovery/app.js';
import type { BookTurns } from '../discovery/book-turns.js';
import type { LeaseStore } from '../book/lease-store.js';
import { DiscoveryServer } from '../discovery/server.js';
import type { TargetCooldownMetrics } from '../discovery/target-cooldown-metrics.js';
import type { TenantLedger } from '../book/tenant-quotas.js';
import { readFileSync } from 'node:fs';
import type { ClientTokens } from './client-tokens.js';
import type { LeaseBook } from './lease-book.js';
import type { CachedProxyCatalog } from './proxy-catalog.js';
import type { HandlerSettings } from './settings.js';
import {
  CLIENT_TOKENS,
  HANDLER_SETTINGS,
  LEASE_BOOK,
  METRICS_REGISTRY,
  ROOT_LOGGER,
  TARGET_COOLDOWNS,
  BOOK_TURNS,
  TENANT_LEDGER,
} from './tokens.js';

/**
 * Serves the discovery/lease API on every replica (not only the leader), reading proxies
 * from this replica's cache and leases from the process's lease book.
 */
@background()
export class DiscoveryRunner {
  private readonly proxies: CachedProxyCatalog;
  private readonly leases: LeaseStore;
  private readonly app: ReturnType<typeof createDiscoveryApp>;
  private readonly logger: Logger;

  constructor(
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(LEASE_BOOK) book: LeaseBook,
    @inject(CLIENT_TOKENS) private readonly clientTokens: ClientTokens,
    @inject(TARGET_COOLDOWNS) targetCooldowns: TargetCooldownMetrics,
    @inject(BOOK_TURNS) bookTurns: BookTurns,
    @inject(TENANT_LEDGER) ledger: TenantLedger,
    @inject(METRICS_REGISTRY) registry: Registry,
    @inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.logger = logger.child({ component: 'discovery' });
    this.proxies = book.proxies;
    this.leases = book.store;
    const { catalog } = this.proxies;
    // Built once so its metrics register once, even if the daemon restarts.
    this.app = createDiscoveryApp({
      catalog,
      leases: this.leases,
      // The process's tokens (createProxyOperator): the gateway reads the same live set.
      ...(clientTokens.tokens === undefined ? {} : { tokens: clientTokens.tokens }),
      // Wrong tokens counted with the gateway's: one budget per address for both doors.
      failedAuth: clientTokens.failedAuth,
      ...(settings.discovery.rateLimit === undefined ? {} : { rateLimit: settings.discovery.rateLimit }),
      logger: this.logger,
      registry,
      maxTTLSeconds: settings.discovery.maxLeaseTTLSeconds,
      // The process's share (createProxyOperator, with the flags' limits): the gateway's too.
      bookTurns,
      sessionIdleSeconds: settings.book.sessionIdleSeconds,
      metricsTargetNames: settings.discovery.metricsTargetNames === true,
      targetCooldowns,
      // The process's quotas (createProxyOperator, with --discovery-session-quota): the gateway's too.
      ledger,
    });
    const { tls } = settings.discovery;
    this.tls =
      tls === undefined
        ? undefined
        : {
            cert: readPem('--discovery-tls-cert', tls.certFile),
            key: readPem('--discovery-tls-key', tls.keyFile),
          };
  }

  private server?: DiscoveryServer;
  private readonly tls?: { cert: Buffer; key: Buffer };

  /**
   * Binds the API before the operator reports itself started: a port that cannot be bound
   * (EADDRINUSE, EACCES) fails the start-up, and the entry point exits naming the flag,
   * instead of a daemon retrying every minute while the Pod looks healthy.
   */
  @onStartup()
  async open(ctx: OperatorContext): Promise<void> {
    this.proxies.attach(ctx.cache);
    const server = new DiscoveryServer(
      this.app,
      {
        host: this.settings.discovery.host,
        port: this.settings.discovery.port,
        ...(this.tls === undefined ? {} : { tls: this.tls }),
      },
      this.logger,
    );
    await server.start();
    this.server = server;
    this.clientTokens.acquire();
    await this.leases.start();
  }

  /** Serves until the operator stops (on every replica), then closes the API. */
  @daemon({ everyReplica: true })
  async serve(ctx: OperatorContext): Promise<void> {
    await ctx.stopped;
    await this.close();
  }

  /** For a stop that came before the daemon ran (a stop during start-up). */
  @onCleanup()
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    this.clientTokens.release();
    await server.stop();
    await this.leases.stop();
    this.proxies.detachFromCache();
  }
}

/** A PEM file the API serves TLS with; unreadable stops start-up naming the flag. */
function readPem(flag: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new Error(`${flag}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, {
      cause: err,
    });
  }
}

import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { background, daemon, onCleanup, onStartup, type OperatorContext } from '../framework/index.js';
import { ApiTokens } from '../book/api-tokens.js';
import { OPEN_POLICY } from '../book/token-scope.js';
import { Gateway } from '../gateway/gateway-server.js';
import type { TargetCooldownMetrics } from '../discovery/target-cooldown-metrics.js';
import type { BookTurns } from '../discovery/book-turns.js';
import type { TenantLedger } from '../book/tenant-quotas.js';
import { gatewayBook, gatewayCooldowns, gatewayTokens } from './gateway-book.js';
import { gatewayGuard } from './gateway-guard.js';
import type { ClientTokens } from './client-tokens.js';
import type { LeaseBook } from './lease-book.js';
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
 * Serves the forward-proxy gateway (gateway/) on every replica, over the process's lease book
 * and the discovery API's named tokens. Does nothing when settings.gateway is unset (tests
 * that run the default handler list).
 */
@background()
export class GatewayRunner {
  private readonly gateway?: Gateway;
  private readonly logger: Logger;
  private listening = false;

  constructor(
    @inject(HANDLER_SETTINGS) private readonly settings: HandlerSettings,
    @inject(LEASE_BOOK) private readonly book: LeaseBook,
    @inject(CLIENT_TOKENS) private readonly clientTokens: ClientTokens,
    @inject(TARGET_COOLDOWNS) targetCooldowns: TargetCooldownMetrics,
    @inject(BOOK_TURNS) bookTurns: BookTurns,
    @inject(TENANT_LEDGER) ledger: TenantLedger,
    @inject(METRICS_REGISTRY) registry: Registry,
    @inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.logger = logger.child({ component: 'gateway' });
    const gw = settings.gateway;
    if (gw === undefined) return;
    // The process's tokens (createProxyOperator), the very set the discovery API reads: one
    // reload of the tokens file applies to both doors at once.
    let tokens: ApiTokens | undefined = clientTokens.tokens;
    if (tokens === undefined && gw.demoToken !== undefined) tokens = ApiTokens.single(gw.demoToken, 'demo');
    // Never an open proxy: without tokens the gateway answers 407 no_tokens_configured.
    if (tokens === undefined)
      this.logger.warn('gateway: no discovery API token configured; every request is refused with 407');
    this.gateway = new Gateway({
      book: gatewayBook(
        book.store,
        book.proxies.catalog,
        (owner) => tokens?.policyOf(owner) ?? OPEN_POLICY,
        gatewayCooldowns(targetCooldowns, this.logger),
        // One share of the book with the API's calls: one book, two doors.
        bookTurns,
        // One ledger of per-token quotas with the API's: a token's leases count at both doors.
        ledger,
      ),
      tokens: gatewayTokens(tokens, clientTokens.failedAuth),
      // The health engine's rule: a leased External proxy whose name now resolves inside is
      // never connected to (handlers/health-runner.ts refuses it at its probes).
      guard: gatewayGuard(settings.externalEndpoints),
      registry,
      logger: this.logger,
      options: {
        maxAttempts: gw.maxAttempts,
        connectTimeoutMs: gw.connectTimeoutMs,
        responseTimeoutMs: gw.responseTimeoutMs,
        tunnelIdleMs: gw.tunnelIdleSeconds * 1000,
        ttlSeconds: Math.min(gw.ttlSeconds, settings.discovery.maxLeaseTTLSeconds),
        maxTTLSeconds: settings.discovery.maxLeaseTTLSeconds,
        idleMs: gw.idleSeconds * 1000,
        codes: { banned: new Set(gw.bannedCodes), rateLimited: new Set(gw.rateLimitedCodes) },
      },
    });
  }

  /** Binds before the operator reports itself started: a port it cannot have fails start-up. */
  @onStartup()
  async open(ctx: OperatorContext): Promise<void> {
    const gw = this.settings.gateway;
    if (this.gateway === undefined || gw === undefined) return;
    this.book.proxies.attach(ctx.cache);
    await this.book.store.start();
    const at = await this.gateway.listen(gw.host, gw.port);
    this.listening = true;
    this.clientTokens.acquire();
    this.logger.info({ address: `${at.host}:${at.port}` }, 'gateway listening');
  }

  /** Serves until the operator stops, then drains tunnels within the grace period. */
  @daemon({ everyReplica: true })
  async serve(ctx: OperatorContext): Promise<void> {
    await ctx.stopped;
    await this.close();
  }

  @onCleanup()
  async close(): Promise<void> {
    if (!this.listening || this.gateway === undefined) return;
    this.listening = false;
    this.clientTokens.release();
    await this.gateway.close((this.settings.gateway?.drainSeconds ?? 0) * 1000);
  }
}

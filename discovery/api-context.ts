// What every route of the discovery API shares: the book, the token's identity and scope, the
// quotas and the metrics. Built once per app (app.ts); each routes module takes it whole.
import type { RequestHandler, Response } from 'express';
import type { Logger } from 'pino';
import type { ApiTokens } from '../book/api-tokens.js';
import type { ProxyCatalog, ProxyRecord } from '../book/catalog.js';
import type { LeaseStore } from '../book/lease-store.js';
import type { TenantLedger, TenantQuotaLimits } from '../book/tenant-quotas.js';
import type { DiscoveryMetrics } from './discovery-metrics.js';
import type { ReportLog } from './report-log.js';
import type { TargetCooldownMetrics } from './target-cooldown-metrics.js';

/** The TTLs a lease or renew body may ask for (request-parsing.ts checks them). */
export interface TTLLimits {
  maxTTLSeconds: number;
  defaultTTLSeconds: number;
}

/** A quota a token is over (429 with Retry-After, counted per token). */
export type QuotaCode = 'lease_quota' | 'cooldown_quota' | 'report_quota';

export interface ApiContext {
  catalog: ProxyCatalog;
  /** The book, each call naming its token taking a turn in the fair share (fair-lease-store.ts). */
  leases: LeaseStore;
  logger: Logger;
  /** The named tokens; undefined when the API is unauthenticated (one anonymous owner). */
  tokens: ApiTokens | undefined;
  metrics: DiscoveryMetrics;
  cooldowns: TargetCooldownMetrics;
  /** What each token holds on this replica, against its quotas. */
  ledger: TenantLedger;
  quotas: TenantQuotaLimits;
  reportLog: ReportLog;
  limits: TTLLimits;
  /** The lease store's clock (ms since the epoch). */
  clock: () => number;
  /** Every /v1 route's first handler: no-store, authentication, the token's rate limit. */
  guard: RequestHandler;
  /** The JSON body parser (with its size limit). */
  body: RequestHandler;
  /** Who asks: the token's name, or the anonymous owner. */
  owner(res: Response): string;
  /** The asking token's scope as a predicate; undefined: every proxy. */
  scopeOf(res: Response): ((proxy: ProxyRecord) => boolean) | undefined;
  /** Answers 429 for a quota, with Retry-After, and counts it. */
  quotaRefusal(res: Response, code: QuotaCode, message: string, retryAfterSeconds: number): void;
}

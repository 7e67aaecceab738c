/**
 * The DI tokens of the handler classes, in one place: each names a process-wide piece the
 * entry point (createProxyOperator) creates once and registers in the operator's container.
 */

/** The ProviderSet built at startup from the providers config. */
export const PROVIDERS = Symbol('ProviderSet');
/** The handlers' tunables (HandlerSettings; the entry point fills them from flags). */
export const HANDLER_SETTINGS = Symbol('HandlerSettings');
/** The VerdictBoard the health runner writes and the reconciler reads. */
export const VERDICTS = Symbol('VerdictBoard');
/** The prom-client Registry every metric registers in. */
export const METRICS_REGISTRY = Symbol('MetricsRegistry');
/** The root pino Logger. */
export const ROOT_LOGGER = Symbol('RootLogger');
/** The LeaseBook (catalog + lease store) discovery serves from and the health runner feeds. */
export const LEASE_BOOK = Symbol('LeaseBook');
/** The process's one source of client tokens (ClientTokens) both the discovery API and the gateway read. */
export const CLIENT_TOKENS = Symbol('ClientTokens');
/** The process's cooldowns-by-target counter (TargetCooldownMetrics): both doors count their bans in it. */
export const TARGET_COOLDOWNS = Symbol('TargetCooldowns');
/** The process's fair share of the lease book among tokens (BookTurns): both doors take turns in it. */
export const BOOK_TURNS = Symbol('BookTurns');
/** The process's per-token quotas (TenantLedger): both doors count a token's leases, sessions and cooldowns in it. */
export const TENANT_LEDGER = Symbol('TenantLedger');

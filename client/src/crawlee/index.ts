// @proxy-operator/client/crawlee: the Crawlee 3 integration (crawlee is a peer dependency).
export {
  ProxyOperatorConfiguration,
  isProxyFailure,
  MISSING_ERROR_HANDLER,
  type CrawlerWiring,
  type OwnHooks,
  outcomeOf,
  retryAfterSeconds,
  type NavigationContext,
  type ProxyOperatorConfigurationOptions,
} from './proxy-configuration.js';
export { hostOf } from './host-names.js';
export {
  SessionLeases,
  renewalDelayMs,
  sessionKey,
  type LeaseLog,
  type SessionLeasesOptions,
  type SessionLeasesStats,
} from './session-leases.js';

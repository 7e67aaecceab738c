// @proxy-operator/client/crawlee: the Crawlee 3 integration (crawlee is a peer dependency).
export {
  ProxyOperatorConfiguration,
  isProxyFailure,
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

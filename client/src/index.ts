// @proxy-operator/client: a typed client for the proxy-operator discovery API.
export { DiscoveryClient, DEFAULT_TIMEOUT_MS, MAX_BATCH_REPORTS } from './client.js';
export type {
  CallOptions,
  DiscoveryClientOptions,
  LeaseCallOptions,
  ListOptions,
  ProxyRef,
} from './client.js';
export { backoffDelayMs, BACKOFF_DEFAULTS, type BackoffOptions } from './backoff.js';
export {
  DiscoveryApiError,
  DiscoveryError,
  DiscoveryTimeoutError,
  DiscoveryTransportError,
  isLeaseGone,
  isNoLease,
} from './errors.js';
export type * from './types.js';

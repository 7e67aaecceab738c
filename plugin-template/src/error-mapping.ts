import { isNetworkError, type ProviderErrorKind } from 'proxy-operator/plugin';

/**
 * Your cloud's errors → the operator's four kinds, as a table. Network failures are Transient
 * (the plugin API's shared classifier); add your API's codes above the fallback.
 */
export function classifyError(err: unknown): ProviderErrorKind {
  if (isNetworkError(err)) return 'Transient';
  const status = (err as { status?: unknown } | null)?.status;
  if (status === 404) return 'NotFound';
  if (status === 429) return 'QuotaExceeded';
  if (typeof status === 'number' && status >= 400 && status < 500) return 'Permanent';
  // Unknown shapes: retrying with backoff is harmless, failing a Proxy is not.
  return 'Transient';
}

import { ApiException } from '@kubernetes/client-node';
import type { ProviderErrorKind } from '../errors.js';

export type KubeErrorMeaning = ProviderErrorKind | 'AlreadyExists';

/** The HTTP status of an API server error, or undefined for network-level failures. */
export function statusOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/**
 * API server response → taxonomy. A 404 on create means the namespace is missing, which
 * retrying cannot fix; 401 is an expiring token, worth retrying; network failures are Transient.
 */
export function classifyKubeError(err: unknown, op: 'create' | 'get' | 'delete' | 'list'): KubeErrorMeaning {
  const status = statusOf(err);
  if (status === undefined) return 'Transient';
  if (status === 404) return op === 'create' ? 'Permanent' : 'NotFound';
  if (status === 409) return op === 'create' ? 'AlreadyExists' : 'Transient';
  if (status === 429 || status === 401 || status >= 500) return 'Transient';
  if (status >= 400) return 'Permanent';
  return 'Transient';
}

/** The API server's own explanation (a Status object's message), else the error message. */
export function messageOf(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = err.body;
    const parsed = typeof body === 'string' ? safeJson(body) : body;
    const message = (parsed as { message?: unknown } | undefined)?.message;
    return typeof message === 'string' ? `HTTP ${err.code}: ${message}` : `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

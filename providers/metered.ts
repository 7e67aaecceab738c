import { Counter, type Registry } from 'prom-client';
import type { CreateRequest, Instance, Provider } from './contract.js';
import { isProviderError, type ProviderOperation } from './errors.js';

export const PROVIDER_REQUESTS_METRIC = 'proxy_operator_provider_requests_total';

export type ProviderRequestResult =
  'ok' | 'not_found' | 'quota_exceeded' | 'transient' | 'permanent' | 'aborted' | 'error';

const RESULT_BY_KIND = {
  NotFound: 'not_found',
  QuotaExceeded: 'quota_exceeded',
  Transient: 'transient',
  Permanent: 'permanent',
} as const;

/**
 * The result label for an outcome: a call its caller aborted (shutdown, a handler's deadline)
 * is 'aborted', not a failure; untyped errors are 'error' (a provider that forgot to map).
 */
export function resultOf(err: unknown, signal?: AbortSignal): ProviderRequestResult {
  if (signal?.aborted && err === signal.reason) return 'aborted';
  return isProviderError(err) ? RESULT_BY_KIND[err.kind] : 'error';
}

type RequestsCounter = Counter<'provider' | 'op' | 'result'>;

/** The requests counter registered in `registry`; reused if already there (one per registry). */
export function providerRequestsCounter(registry: Registry): RequestsCounter {
  const existing = registry.getSingleMetric(PROVIDER_REQUESTS_METRIC);
  if (existing) return existing as RequestsCounter;
  return new Counter({
    name: PROVIDER_REQUESTS_METRIC,
    help: 'Calls to cloud providers by provider instance, operation and result.',
    labelNames: ['provider', 'op', 'result'] as const,
    registers: [registry],
  });
}

/**
 * Wraps a provider so every call is counted in one place, whatever the provider: new
 * providers get the metric for free and cannot label it differently.
 */
export class MeteredProvider implements Provider {
  constructor(
    private readonly inner: Provider,
    private readonly providerName: string,
    private readonly requests: RequestsCounter,
  ) {}

  create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    return this.count('create', signal, () => this.inner.create(req, signal));
  }
  get(providerID: string, signal?: AbortSignal): Promise<Instance> {
    return this.count('get', signal, () => this.inner.get(providerID, signal));
  }
  delete(providerID: string, signal?: AbortSignal): Promise<void> {
    return this.count('delete', signal, () => this.inner.delete(providerID, signal));
  }
  listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    return this.count('listByTag', signal, () => this.inner.listByTag(owner, signal));
  }

  private async count<T>(
    op: ProviderOperation,
    signal: AbortSignal | undefined,
    call: () => Promise<T>,
  ): Promise<T> {
    try {
      const value = await call();
      this.requests.inc({ provider: this.providerName, op, result: 'ok' });
      return value;
    } catch (err) {
      this.requests.inc({ provider: this.providerName, op, result: resultOf(err, signal) });
      throw err;
    }
  }
}

import { Registry } from 'prom-client';
import type { CreateRequest, Instance, Provider } from '../../providers/contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  QuotaExceededError,
  TransientError,
  type ProviderErrorContext,
} from '../../providers/errors.js';
import {
  MeteredProvider,
  PROVIDER_REQUESTS_METRIC,
  providerRequestsCounter,
} from '../../providers/metered.js';

const ctx: ProviderErrorContext = { provider: 'p', operation: 'get' };

/** A provider whose every call settles with the next queued outcome. */
class ScriptedProvider implements Provider {
  constructor(private readonly outcome: () => unknown) {}
  private settle<T>(value: T): Promise<T> {
    const result = this.outcome();
    return result instanceof Error ? Promise.reject(result) : Promise.resolve(value);
  }
  create(_req: CreateRequest) {
    return this.settle('id-1');
  }
  get(id: string) {
    return this.settle<Instance>({
      id,
      ip: '',
      state: 'Running',
      uid: 'u',
      owner: 'o',
      namespace: 'ns',
      revision: '',
      createdAt: new Date(0),
    });
  }
  delete() {
    return this.settle(undefined);
  }
  listByTag() {
    return this.settle<Instance[]>([]);
  }
}

async function counterValue(registry: Registry, labels: Record<string, string>): Promise<number> {
  const metric = await registry.getSingleMetric(PROVIDER_REQUESTS_METRIC)!.get();
  const match = metric.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val));
  return match?.value ?? 0;
}

const req: CreateRequest = {
  uid: 'u',
  proxy: 'ns/p',
  namespace: 'ns',
  owner: 'test-owner',
  port: 3128,
  placement: {},
};

describe('MeteredProvider', () => {
  it.each([
    ['ok', undefined],
    ['not_found', new NotFoundError('x', ctx)],
    ['quota_exceeded', new QuotaExceededError('x', ctx)],
    ['transient', new TransientError('x', ctx)],
    ['permanent', new ProviderPermanentError('x', ctx)],
    ['error', new Error('a provider forgot to map this')],
  ])('counts a call that ends %s under result=%s', async (result, outcome) => {
    const registry = new Registry();
    const metered = new MeteredProvider(
      new ScriptedProvider(() => outcome),
      'gcp-eu',
      providerRequestsCounter(registry),
    );
    await metered.get('id-1').catch(() => undefined);
    expect(await counterValue(registry, { provider: 'gcp-eu', op: 'get', result })).toBe(1);
  });

  it('labels each operation by its name and passes values and errors through unchanged', async () => {
    const registry = new Registry();
    const boom = new TransientError('x', ctx);
    let fail = false;
    const metered = new MeteredProvider(
      new ScriptedProvider(() => (fail ? boom : undefined)),
      'mock',
      providerRequestsCounter(registry),
    );
    await expect(metered.create(req)).resolves.toBe('id-1');
    await expect(metered.delete('id-1')).resolves.toBeUndefined();
    await expect(metered.listByTag('test-owner')).resolves.toEqual([]);
    fail = true;
    await expect(metered.listByTag('test-owner')).rejects.toBe(boom);
    expect(await counterValue(registry, { op: 'create', result: 'ok' })).toBe(1);
    expect(await counterValue(registry, { op: 'delete', result: 'ok' })).toBe(1);
    expect(await counterValue(registry, { op: 'listByTag', result: 'ok' })).toBe(1);
    expect(await counterValue(registry, { op: 'listByTag', result: 'transient' })).toBe(1);
  });

  it('counts a call its caller aborted as result=aborted, not as a failure', async () => {
    const registry = new Registry();
    const ctl = new AbortController();
    const reason = new Error('shutting down');
    const metered = new MeteredProvider(
      { ...new ScriptedProvider(() => undefined), get: () => Promise.reject(reason) } as unknown as Provider,
      'aws',
      providerRequestsCounter(registry),
    );
    ctl.abort(reason);
    await expect(metered.get('id-1', ctl.signal)).rejects.toBe(reason);
    expect(await counterValue(registry, { provider: 'aws', op: 'get', result: 'aborted' })).toBe(1);
    expect(await counterValue(registry, { provider: 'aws', op: 'get', result: 'error' })).toBe(0);
  });

  it('registers the counter once per registry and never in the global default registry', async () => {
    const { register: globalRegistry } = await import('prom-client');
    const registry = new Registry();
    expect(providerRequestsCounter(registry)).toBe(providerRequestsCounter(registry));
    expect(globalRegistry.getSingleMetric(PROVIDER_REQUESTS_METRIC)).toBeUndefined();
  });
});

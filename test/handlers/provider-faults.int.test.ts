import type { Instance } from '../../providers/contract.js';
import { providerError, type ProviderErrorKind, type ProviderOperation } from '../../providers/errors.js';
import type { ProxyApi } from '../crd/proxy-api.js';
import { condition, eventsOnceThere, eventually, managedSpec, operatorSuite } from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

/** The mock, but calls on one instance fail as a cloud's would (403, 400 resourceNotReady, timeouts). */
class Faulty extends DelegatingProvider {
  private readonly faults = new Map<string, { kind: ProviderErrorKind; message: string; left: number }>();

  fail(
    operation: ProviderOperation,
    providerID: string,
    kind: ProviderErrorKind,
    message: string,
    count: number,
  ) {
    this.faults.set(`${operation} ${providerID}`, { kind, message, left: count });
  }

  private check(operation: ProviderOperation, providerID: string): void {
    const f = this.faults.get(`${operation} ${providerID}`);
    if (!f || f.left <= 0) return;
    f.left--;
    throw providerError(f.kind, f.message, { provider: 'mock', operation, providerID });
  }

  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    this.check('get', id);
    return this.inner.get(id, signal);
  }
  override async delete(id: string, signal?: AbortSignal): Promise<void> {
    this.check('delete', id);
    return this.inner.delete(id, signal);
  }
}

const PERMANENT_FAILURE = 'crawl.example.com/permanent-failure-generation';
let faulty: Faulty;
const suite = operatorSuite('faults', { providers: (mock) => ({ mock: (faulty = new Faulty(mock)) }) });
const { api, kc, namespace } = suite;

const ready = (name: string, predicate: (p: Awaited<ReturnType<ProxyApi['get']>>) => boolean = () => true) =>
  eventually(`${name} Ready`, async () => {
    const p = await api.get(name);
    return p.status?.phase === 'Ready' && predicate(p) ? p : undefined;
  });

describe('a permission blip or a not-ready cloud never fails a running proxy', () => {
  it.each([
    ['a 403 from get', 'Permanent', 'googleapi: Error 403: Required compute.instances.get permission'],
    ['a 400 resourceNotReady from get', 'Permanent', "The resource 'i-1' is not ready (resourceNotReady)"],
    ['a timeout of get', 'Transient', 'deadline exceeded after 30 s'],
  ] as const)(
    '%s keeps it Ready with Provisioned=False/ProviderError, then it recovers',
    async (what, kind, message) => {
      const name = `get-${what.split(' ')[1].toLowerCase()}`;
      await api.create(name, { spec: managedSpec(suite.target) });
      const before = await ready(name);
      faulty.fail('get', before.status!.providerID!, kind, message, 2);
      // A new generation makes the reconciler look at the instance again.
      await api.patchSpec(name, { attributes: { geo: 'elsewhere' } });
      const blip = await eventually('ProviderError', async () => {
        const p = await api.get(name);
        return condition(p, 'Provisioned')?.reason === 'ProviderError' ? p : undefined;
      });
      expect(blip.status?.phase).toBe('Ready');
      expect(condition(blip, 'Healthy')?.status).toBe('True');
      expect(condition(blip, 'Provisioned')).toMatchObject({ status: 'False' });
      expect(condition(blip, 'Provisioned')?.message).toContain(message);
      expect(blip.metadata.annotations?.[PERMANENT_FAILURE]).toBeUndefined();

      const after = await eventually('recovered', async () => {
        const p = await api.get(name);
        return condition(p, 'Provisioned')?.reason === 'InstanceRunning' ? p : undefined;
      });
      expect(after.status?.phase).toBe('Ready');
      expect(after.status?.providerID).toBe(before.status?.providerID);
      const events = await eventsOnceThere(kc, namespace, name, 'ProviderError');
      expect(events.some((e) => e.type === 'Warning' && e.reason === 'ProviderError')).toBe(true);
    },
  );

  it('a delete failure during replacement is never Permanent: the proxy keeps serving, then is replaced', async () => {
    await api.create('replace-blip', { spec: managedSpec(suite.target) });
    const before = await ready('replace-blip');
    faulty.fail(
      'delete',
      before.status!.providerID!,
      'Permanent',
      'googleapi: Error 403: compute.instances.delete',
      2,
    );
    await api.patchSpec('replace-blip', { port: 3131 });
    const blip = await eventually('ProviderError', async () => {
      const p = await api.get('replace-blip');
      return condition(p, 'Provisioned')?.reason === 'ProviderError' ? p : undefined;
    });
    expect(blip.status?.phase).toBe('Ready');
    expect(blip.metadata.annotations?.[PERMANENT_FAILURE]).toBeUndefined();
    const after = await ready('replace-blip', (p) => p.status?.providerID !== before.status?.providerID);
    expect(condition(after, 'Provisioned')?.reason).toBe('InstanceRunning');
  });
});

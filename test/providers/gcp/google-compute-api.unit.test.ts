import type { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { GoogleComputeApi } from '../../../providers/gcp/google-compute-api.js';

/**
 * Stand-ins for the generated clients, recording (request, options). Only the call shapes
 * are checked here: the adapter must pass the short timeout and read the operation name
 * without waiting on the operation.
 */
function clients() {
  const calls: { method: string; req: unknown; options: unknown }[] = [];
  const record = (method: string, result: unknown) => async (req: unknown, options: unknown) => {
    calls.push({ method, req, options });
    return result;
  };
  const instances = {
    insert: record('insert', [{ name: 'ignored-wrapper-name' }, { name: 'operation-123' }, undefined]),
    delete: record('delete', [{ name: 'op-wrapper' }, undefined, undefined]),
    get: record('get', [{ name: 'proxy-1' }, undefined, undefined]),
    aggregatedListAsync: (req: unknown, options: unknown) => {
      calls.push({ method: 'aggregatedListAsync', req, options });
      return (async function* () {
        yield ['zones/a', { instances: [{ name: 'proxy-1' }] }];
        yield ['zones/b', { warning: { code: 'NO_RESULTS_ON_PAGE' } }];
        yield ['zones/c', { instances: [{ name: 'proxy-2' }, { name: 'proxy-3' }] }];
      })();
    },
    close: async () => undefined,
  };
  const operations = {
    get: record('operations.get', [{ name: 'operation-123', status: 'DONE' }]),
    close: async () => undefined,
  };
  const api = new GoogleComputeApi(
    7000,
    instances as unknown as InstancesClient,
    operations as unknown as ZoneOperationsClient,
  );
  return { api, calls };
}

const ref = { project: 'p', zone: 'z', instance: 'proxy-1' };

describe('the @google-cloud/compute adapter', () => {
  it('returns the insert operation name from the raw response, passing the per-call timeout', async () => {
    const { api, calls } = clients();
    const req = { project: 'p', zone: 'z', instanceResource: { name: 'proxy-1' } };
    await expect(api.insert(req)).resolves.toEqual({ operation: 'operation-123' });
    expect(calls).toEqual([{ method: 'insert', req, options: { timeout: 7000 } }]);
  });

  it('falls back to the operation wrapper name', async () => {
    const { api } = clients();
    await expect(api.delete(ref)).resolves.toEqual({ operation: 'op-wrapper' });
  });

  it('flattens the aggregated list across zones, skipping empty ones', async () => {
    const { api, calls } = clients();
    const filter = 'labels.proxy-operator-managed = "true"';
    const vms = await api.aggregatedList({ project: 'p', filter });
    expect(vms.map((v) => v.name)).toEqual(['proxy-1', 'proxy-2', 'proxy-3']);
    expect(calls).toEqual([
      { method: 'aggregatedListAsync', req: { project: 'p', filter }, options: { timeout: 7000 } },
    ]);
  });

  it('gets instances and zone operations with the timeout', async () => {
    const { api, calls } = clients();
    await expect(api.get(ref)).resolves.toEqual({ name: 'proxy-1' });
    await expect(
      api.getZoneOperation({ project: 'p', zone: 'z', operation: 'operation-123' }),
    ).resolves.toMatchObject({
      status: 'DONE',
    });
    expect(calls.map((c) => c.options)).toEqual([{ timeout: 7000 }, { timeout: 7000 }]);
  });
});

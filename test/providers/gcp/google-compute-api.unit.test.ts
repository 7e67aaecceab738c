import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import { classifyGcpError } from '../../../providers/gcp/error-mapping.js';
import { GoogleComputeApi } from '../../../providers/gcp/google-compute-api.js';
import { caught } from '../caught.js';
import { startBlackHole } from '../dead-ends.js';
import { loopbackComputeApi } from './loopback-compute.js';

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

describe('the real @google-cloud/compute client on loopback', () => {
  let server: Server;
  let port: number;
  const notReady = "The resource 'projects/p/zones/z/instances/proxy-1' is not ready";

  beforeAll(async () => {
    // Answers like Compute Engine does for a call on an instance with an operation in flight.
    server = createServer((req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            code: 400,
            message: notReady,
            errors: [{ message: notReady, domain: 'global', reason: 'resourceNotReady' }],
          },
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('surfaces 400 resourceNotReady so the provider classifies it Transient', async () => {
    const api = loopbackComputeApi(port, 5_000);
    try {
      const err = await caught(api.delete(ref));
      expect(err).toMatchObject({ httpStatusCode: 400, message: notReady });
      expect(classifyGcpError(err, 'delete')).toBe('Transient');
    } finally {
      await api.close();
    }
  });

  it('cancels the request itself when the signal aborts: the connection closes', async () => {
    const blackHole = await startBlackHole();
    const api = loopbackComputeApi(blackHole.port);
    try {
      const ctl = new AbortController();
      const pending = api.get(ref, ctl.signal);
      pending.catch(() => undefined);
      for (let i = 0; blackHole.requested() === 0; i++) {
        if (i > 250) throw new Error('the request never arrived');
        await new Promise((r) => setTimeout(r, 20));
      }
      ctl.abort();
      await expect(pending).rejects.toThrow(/aborted/);
      for (let i = 0; blackHole.open() > 0; i++) {
        if (i > 250) throw new Error('the connection stayed open after the abort');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await api.close();
      await blackHole.close();
    }
  });
});

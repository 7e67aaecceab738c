import { pino } from 'pino';
import type { CreateRequest } from '../../../providers/contract.js';
import { isNotFound, isPermanent, isQuotaExceeded, isTransient } from '../../../providers/errors.js';
import { GCP_DEFAULTS } from '../../../providers/gcp/config.js';
import { GcpProvider } from '../../../providers/gcp/gcp-provider.js';
import { instanceName } from '../../../providers/naming.js';
import { caught } from '../caught.js';
import { FakeCompute, gcpErrors } from './fake-compute.js';

const UID = '0b5a3c1e-8d2f-4c6a-9e7b-1f2d3c4b5a69';
const NAME = instanceName(UID);
const ID = `crawl-prod/europe-west1-b/${NAME}`;
const request: CreateRequest = {
  uid: UID,
  proxy: 'fleet/eu-1',
  namespace: 'fleet',
  owner: 'test-owner',
  port: 3128,
  placement: {
    zone: 'europe-west1-b',
    machineType: 'e2-small',
    image: 'projects/debian-cloud/global/images/family/debian-12',
  },
};

const settings = { ...GCP_DEFAULTS, networkTags: ['proxy'], project: 'crawl-prod' };
const logger = pino({ level: 'silent' });

function setup(api = new FakeCompute()) {
  const clock = { ms: 1_000_000 };
  api.now = () => clock.ms;
  const provider = new GcpProvider('gcp-eu', settings, logger, api, () => clock.ms);
  return { api, provider, clock };
}

describe('the GCP provider', () => {
  it('submits the insert and returns project/zone/name without waiting for the operation', async () => {
    const { api, provider } = setup();
    await expect(provider.create(request)).resolves.toBe(ID);
    expect(api.calls.map((c) => c.method)).toEqual(['insert']);
  });

  it('returns the same instance when create is repeated after a simulated crash (insert 409 = exists)', async () => {
    const { api, provider } = setup();
    const first = await provider.create(request);
    // A fresh provider (the operator restarted) repeats the create for the same Proxy.
    const restarted = new GcpProvider('gcp-eu', settings, logger, api);
    await expect(restarted.create(request)).resolves.toBe(first);
    expect(api.vms.size).toBe(1);
  });

  it.each(['zone', 'machineType', 'image'] as const)(
    'fails Permanent, naming placement.%s, when it is missing',
    async (field) => {
      const { api, provider } = setup();
      const err = await caught(
        provider.create({ ...request, placement: { ...request.placement, [field]: undefined } }),
      );
      expect(isPermanent(err)).toBe(true);
      expect((err as Error).message).toContain(`placement.${field} is required`);
      expect(api.calls).toEqual([]);
    },
  );

  it.each([
    [
      'a 400 (bad image)',
      Object.assign(new Error('Invalid value for field image'), { code: 3, httpStatusCode: 400 }),
      isPermanent,
    ],
    [
      'a 403 quota',
      Object.assign(new Error("Quota 'CPUS' exceeded"), { code: 7, httpStatusCode: 403 }),
      isQuotaExceeded,
    ],
    ['a 503', Object.assign(new Error('backend error'), { code: 14, httpStatusCode: 503 }), isTransient],
  ])('maps an insert failing with %s into the taxonomy, keeping the cause', async (_case, failure, guard) => {
    const { api, provider } = setup();
    api.failures.set('insert', failure);
    const err = await caught(provider.create(request));
    expect(guard(err)).toBe(true);
    expect(err).toMatchObject({ provider: 'gcp-eu', operation: 'create', providerID: ID, cause: failure });
  });

  it('reports the VM as the operator sees it', async () => {
    const { api, provider } = setup();
    await provider.create(request);
    const vm = api.vms.get(NAME)!;
    Object.assign(vm, {
      status: 'RUNNING',
      creationTimestamp: '2026-01-01T00:00:00Z',
      networkInterfaces: [{ accessConfigs: [{ natIP: '34.1.2.3' }] }],
    });
    await expect(provider.get(ID)).resolves.toEqual({
      id: ID,
      ip: '34.1.2.3',
      state: 'Running',
      uid: UID,
      owner: 'test-owner',
      namespace: 'fleet',
      revision: '',
      createdAt: new Date('2026-01-01T00:00:00Z'),
    });
    expect(api.calls.at(-1)).toEqual({
      method: 'get',
      req: { project: 'crawl-prod', zone: 'europe-west1-b', instance: NAME },
    });
  });

  it('says NotFound for an instance it never created', async () => {
    const { provider } = setup();
    expect(isNotFound(await caught(provider.get(ID)))).toBe(true);
  });

  it.each(['proxy-abc', 'a/b', 'a/b/c/d'])('refuses the malformed providerID %p as Permanent', async (id) => {
    const { provider } = setup();
    expect(isPermanent(await caught(provider.get(id)))).toBe(true);
    expect(isPermanent(await caught(provider.delete(id)))).toBe(true);
  });

  describe('an accepted insert whose VM is not visible', () => {
    it('is Provisioning while its operation runs', async () => {
      const { api, provider } = setup();
      api.visibleOnInsert = false;
      await provider.create(request);
      await expect(provider.get(ID)).resolves.toMatchObject({
        id: ID,
        state: 'Provisioning',
        ip: '',
        uid: UID,
      });
      expect(api.calls.at(-1)).toEqual({
        method: 'getZoneOperation',
        req: { project: 'crawl-prod', zone: 'europe-west1-b', operation: 'operation-1' },
      });
    });

    it.each([
      ['ZONE_RESOURCE_POOL_EXHAUSTED', isQuotaExceeded],
      ['QUOTA_EXCEEDED', isQuotaExceeded],
      ['RESOURCE_NOT_FOUND', isPermanent],
    ])(
      'surfaces an operation failing with %s once, then is NotFound so the caller re-creates',
      async (code, guard) => {
        const { api, provider } = setup();
        api.visibleOnInsert = false;
        await provider.create(request);
        api.operations.set('operation-1', {
          status: 'DONE',
          error: { errors: [{ code, message: 'in europe-west1-b' }] },
        });
        const err = await caught(provider.get(ID));
        expect(guard(err)).toBe(true);
        expect((err as Error).message).toContain(`${code}: in europe-west1-b`);
        expect(isNotFound(await caught(provider.get(ID)))).toBe(true);
      },
    );

    it('becomes QuotaExceeded when the VM stays invisible past createTimeoutMinutes', async () => {
      const { api, provider, clock } = setup();
      api.visibleOnInsert = false;
      await provider.create(request);
      clock.ms += GCP_DEFAULTS.createTimeoutMinutes * 60_000;
      await expect(provider.get(ID)).resolves.toMatchObject({ state: 'Provisioning' });
      clock.ms += 1;
      const err = await caught(provider.get(ID));
      expect(isQuotaExceeded(err)).toBe(true);
      expect((err as Error).message).toContain('did not appear within 10 minutes');
    });

    it('keeps waiting when the operation cannot be read', async () => {
      const { api, provider } = setup();
      api.visibleOnInsert = false;
      await provider.create(request);
      api.failures.set('getZoneOperation', Object.assign(new Error('unavailable'), { code: 14 }));
      await expect(provider.get(ID)).resolves.toMatchObject({ state: 'Provisioning' });
    });

    it('is forgotten once the VM has been seen', async () => {
      const { api, provider } = setup();
      await provider.create(request);
      await provider.get(ID);
      api.vms.delete(NAME);
      expect(isNotFound(await caught(provider.get(ID)))).toBe(true);
    });
  });

  it('deletes by submitting and returning; deleting a missing VM succeeds', async () => {
    const { api, provider } = setup();
    await provider.create(request);
    await provider.delete(ID);
    expect(api.calls.at(-1)).toEqual({
      method: 'delete',
      req: { project: 'crawl-prod', zone: 'europe-west1-b', instance: NAME },
    });
    await expect(provider.delete(ID)).resolves.toBeUndefined();
  });

  it('maps a failing delete into the taxonomy', async () => {
    const { api, provider } = setup();
    await provider.create(request);
    api.failures.set('delete', Object.assign(new Error('backend'), { code: 13, httpStatusCode: 500 }));
    expect(isTransient(await caught(provider.delete(ID)))).toBe(true);
  });

  describe('a delete under way (GCP answers 400 resourceNotReady to another one)', () => {
    const deletes = (api: FakeCompute) => api.calls.filter((c) => c.method === 'delete').length;

    it('is not re-issued while its own delete operation runs; the VM goes and get says NotFound', async () => {
      const { api, provider, clock } = setup();
      api.deleteMillis = 30_000;
      await provider.create(request);
      await provider.delete(ID);
      await expect(provider.get(ID)).resolves.toMatchObject({ state: 'Stopped' });
      await provider.delete(ID);
      await provider.delete(ID);
      expect(deletes(api)).toBe(1);
      clock.ms += 30_000;
      expect(isNotFound(await caught(provider.get(ID)))).toBe(true);
      await provider.delete(ID);
      expect(deletes(api)).toBe(1);
    });

    it('is not re-issued while the VM is STOPPING, even by a process that did not submit it (a restart)', async () => {
      const { api, provider } = setup();
      api.deleteMillis = 30_000;
      await provider.create(request);
      await provider.delete(ID);
      const { provider: restarted } = setup(api);
      await expect(restarted.delete(ID)).resolves.toBeUndefined();
      expect(deletes(api)).toBe(1);
    });

    it('is issued again once the earlier operation is done but the VM is still there', async () => {
      const { api, provider } = setup();
      api.deleteMillis = 30_000;
      await provider.create(request);
      await provider.delete(ID);
      // The delete failed on Google's side: the operation is DONE, the VM runs again.
      const [[, op]] = [...api.operations].filter(([name]) => name.startsWith('delete-'));
      op.status = 'DONE';
      api.vms.get(NAME)!.status = 'RUNNING';
      await provider.delete(ID);
      expect(deletes(api)).toBe(2);
    });

    it('is a Transient failure when GCP still answers resourceNotReady (an operation in flight)', async () => {
      const { api, provider } = setup();
      await provider.create(request);
      api.failures.set(
        'delete',
        gcpErrors.notReady({ project: 'crawl-prod', zone: 'europe-west1-b', instance: NAME }),
      );
      const err = await caught(provider.delete(ID));
      expect(isTransient(err)).toBe(true);
      expect((err as Error).message).toContain('is not ready');
    });
  });

  it('lists tagged instances across zones with the managed- and owner-label filter', async () => {
    const { api, provider } = setup();
    await provider.create(request);
    await provider.create({
      ...request,
      uid: 'other',
      placement: { ...request.placement, zone: 'us-east1-c' },
    });
    const listed = await provider.listByTag('test-owner');
    expect(api.calls.at(-1)).toEqual({
      method: 'aggregatedList',
      req: {
        project: 'crawl-prod',
        filter: 'labels.proxy-operator-managed = "true" AND labels.proxy-operator-owner = "test-owner"',
      },
    });
    expect(listed.map((i) => [i.id, i.uid])).toEqual([
      [ID, UID],
      [`crawl-prod/us-east1-c/${instanceName('other')}`, 'other'],
    ]);
  });

  it('maps a failing list into the taxonomy', async () => {
    const { api, provider } = setup();
    api.failures.set('aggregatedList', Object.assign(new Error('denied'), { code: 7, httpStatusCode: 403 }));
    const err = await caught(provider.listByTag('test-owner'));
    expect(isPermanent(err)).toBe(true);
    expect(err).toMatchObject({ operation: 'listByTag' });
  });

  it('does not call the API once the signal is aborted', async () => {
    const { api, provider } = setup();
    const ctl = new AbortController();
    ctl.abort();
    await expect(provider.create(request, ctl.signal)).rejects.toThrow();
    expect(api.calls).toEqual([]);
  });

  it.each(['insert', 'get', 'delete', 'aggregatedList'] as const)(
    'hands the signal to the Compute call (%s), so an abort cancels the request itself',
    async (method) => {
      const { api, provider } = setup();
      await provider.create(request);
      api.hanging.add(method);
      const ctl = new AbortController();
      const call =
        method === 'insert'
          ? provider.create({ ...request, uid: 'another' }, ctl.signal)
          : method === 'get'
            ? provider.get(ID, ctl.signal)
            : method === 'delete'
              ? provider.delete(ID, ctl.signal)
              : provider.listByTag('test-owner', ctl.signal);
      await new Promise((r) => setTimeout(r, 20));
      const reason = new Error('shutdown');
      ctl.abort(reason);
      await expect(call).rejects.toBe(reason);
      expect(api.aborted).toEqual([method]);
    },
  );
});

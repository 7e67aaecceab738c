import { pino } from 'pino';
import type { CreateRequest } from '../../../providers/contract.js';
import {
  isNotFound,
  isPermanent,
  isQuotaExceeded,
  isTransient,
  type ProviderOperation,
} from '../../../providers/errors.js';
import { MOCK_DEFAULTS, type MockSettings } from '../../../providers/mock/config.js';
import type { FaultKind } from '../../../providers/mock/faults.js';
import { MockProvider } from '../../../providers/mock/mock-provider.js';
import { instanceName } from '../../../providers/naming.js';
import { caught } from '../caught.js';

const logger = pino({ level: 'silent' });

class FakeClock {
  constructor(public ms = Date.parse('2026-01-01T00:00:00Z')) {}
  now = () => this.ms;
  advance(seconds: number) {
    this.ms += seconds * 1000;
  }
}

function mock(settings: Partial<MockSettings> = {}, clock = new FakeClock()) {
  const provider = new MockProvider(
    'mock',
    { ...MOCK_DEFAULTS, faults: {}, ...settings },
    logger,
    undefined,
    clock,
  );
  return { provider, clock };
}

const req = (uid: string, port = 3128): CreateRequest => ({
  uid,
  proxy: 'default/p',
  namespace: 'default',
  owner: 'test-owner',
  port,
  placement: {},
});

const GUARDS: Record<Exclude<FaultKind, 'hang'>, (e: unknown) => boolean> = {
  quota: isQuotaExceeded,
  transient: isTransient,
  permanent: isPermanent,
};

describe('the mock provider', () => {
  it('names the instance from the UID', async () => {
    const { provider } = mock();
    await expect(provider.create(req('uid-1'))).resolves.toBe(instanceName('uid-1'));
  });

  it('is Provisioning for provisioningSeconds (default 5), then Running with a 10.x IP', async () => {
    const { provider, clock } = mock();
    const id = await provider.create(req('uid-1'));
    expect(await provider.get(id)).toMatchObject({ id, uid: 'uid-1', state: 'Provisioning', ip: '' });
    clock.advance(4.9);
    expect((await provider.get(id)).state).toBe('Provisioning');
    clock.advance(0.1);
    const running = await provider.get(id);
    expect(running.state).toBe('Running');
    expect(running.ip).toMatch(/^10\.99\.\d+\.\d+$/);
    expect(running.createdAt).toEqual(new Date(clock.ms - 5000));
  });

  it('honours a configured provisioning time and IP range', async () => {
    const { provider, clock } = mock({ provisioningSeconds: 60, ipRange: '10.7.3.0/24' });
    const a = await provider.create(req('a'));
    const b = await provider.create(req('b'));
    clock.advance(59);
    expect((await provider.get(a)).state).toBe('Provisioning');
    clock.advance(1);
    expect([(await provider.get(a)).ip, (await provider.get(b)).ip]).toEqual(['10.7.3.1', '10.7.3.2']);
  });

  it('returns the same instance when create is repeated after a simulated crash', async () => {
    const { provider, clock } = mock();
    const first = await provider.create(req('uid-1'));
    clock.advance(10);
    const ipBefore = (await provider.get(first)).ip;
    // The caller "crashed" and lost the providerID: it calls create again with the same UID.
    const again = await provider.create(req('uid-1'));
    expect(again).toBe(first);
    expect(await provider.get(again)).toMatchObject({ state: 'Running', ip: ipBefore });
    expect(await provider.listByTag('test-owner')).toHaveLength(1);
  });

  it('makes one instance when many creates of one UID run concurrently', async () => {
    const { provider } = mock();
    const ids = await Promise.all(Array.from({ length: 20 }, () => provider.create(req('same'))));
    expect(new Set(ids).size).toBe(1);
    expect(await provider.listByTag('test-owner')).toHaveLength(1);
  });

  it('lists every instance with its owner UID for the orphan sweep', async () => {
    const { provider } = mock();
    await Promise.all(['a', 'b', 'c'].map((uid) => provider.create(req(uid))));
    expect((await provider.listByTag('test-owner')).map((i) => i.uid).sort()).toEqual(['a', 'b', 'c']);
  });

  it('lists only the instances of the owner asked for, with their namespace and revision', async () => {
    const { provider } = mock();
    await provider.create({ ...req('mine'), revision: 'abcdef12' });
    await provider.create({ ...req('theirs'), owner: 'other-cluster', namespace: 'prod' });
    expect(await provider.listByTag('test-owner')).toEqual([
      expect.objectContaining({
        uid: 'mine',
        owner: 'test-owner',
        namespace: 'default',
        revision: 'abcdef12',
      }),
    ]);
    expect((await provider.listByTag('other-cluster')).map((i) => [i.uid, i.namespace])).toEqual([
      ['theirs', 'prod'],
    ]);
  });

  it('deletes idempotently, after which get is NotFound', async () => {
    const { provider } = mock();
    const id = await provider.create(req('uid-1'));
    await provider.delete(id);
    await provider.delete(id);
    expect(isNotFound(await caught(provider.get(id)))).toBe(true);
    await expect(provider.listByTag('test-owner')).resolves.toEqual([]);
  });

  it('reports an unknown providerID as NotFound', async () => {
    const { provider } = mock();
    expect(isNotFound(await caught(provider.get('proxy-000000000000')))).toBe(true);
  });

  it.each([0, 70000, 1.5])('refuses port %p as a Permanent error', async (port) => {
    const { provider } = mock();
    expect(isPermanent(await caught(provider.create(req('u', port))))).toBe(true);
  });

  describe('fault injection', () => {
    it.each<Exclude<FaultKind, 'hang'>>(['quota', 'transient', 'permanent'])(
      'failNextCreates(2, %s) fails exactly the next two creates with that kind',
      async (kind) => {
        const { provider } = mock();
        provider.failNextCreates(2, kind);
        expect(GUARDS[kind](await caught(provider.create(req('u'))))).toBe(true);
        expect(GUARDS[kind](await caught(provider.create(req('u'))))).toBe(true);
        await expect(provider.create(req('u'))).resolves.toBe(instanceName('u'));
      },
    );

    const ops: ProviderOperation[] = ['create', 'get', 'delete', 'listByTag'];
    const call = (p: MockProvider, op: ProviderOperation, id: string) =>
      op === 'create'
        ? p.create(req('u'))
        : op === 'get'
          ? p.get(id)
          : op === 'delete'
            ? p.delete(id)
            : p.listByTag('test-owner');

    it.each(
      ops.flatMap((op) => (['quota', 'transient', 'permanent'] as const).map((kind) => [op, kind] as const)),
    )('injectFault(%s, %s) fails that operation once, then it works again', async (op, kind) => {
      const { provider } = mock();
      const id = await provider.create(req('u'));
      provider.injectFault(op, kind);
      const err = await caught(call(provider, op, id));
      expect(GUARDS[kind](err)).toBe(true);
      expect(err).toMatchObject({ provider: 'mock', operation: op });
      await call(provider, op, id);
    });

    it('starts with the faults from its config', async () => {
      const { provider } = mock({
        faults: { create: { kind: 'quota', count: 1 }, listByTag: { kind: 'transient', count: 2 } },
      });
      expect(isQuotaExceeded(await caught(provider.create(req('u'))))).toBe(true);
      expect(isTransient(await caught(provider.listByTag('test-owner')))).toBe(true);
      expect(isTransient(await caught(provider.listByTag('test-owner')))).toBe(true);
      await expect(provider.create(req('u'))).resolves.toBeDefined();
      await expect(provider.listByTag('test-owner')).resolves.toHaveLength(1);
    });

    it('affects only the operation it was injected for', async () => {
      const { provider } = mock();
      provider.injectFault('delete', 'permanent', 3);
      const id = await provider.create(req('u'));
      await expect(provider.get(id)).resolves.toBeDefined();
      await expect(provider.listByTag('test-owner')).resolves.toHaveLength(1);
    });

    it.each(ops)(
      'a hang fault on %s never answers until the call is aborted, then rejects with the abort reason',
      async (op) => {
        const { provider } = mock();
        const id = await provider.create(req('u'));
        provider.injectFault(op, 'hang');
        const ctl = new AbortController();
        const call$ = (() => {
          switch (op) {
            case 'create':
              return provider.create(req('u'), ctl.signal);
            case 'get':
              return provider.get(id, ctl.signal);
            case 'delete':
              return provider.delete(id, ctl.signal);
            case 'listByTag':
              return provider.listByTag('test-owner', ctl.signal);
          }
        })();
        const settled = await Promise.race([
          call$.then(
            () => 'resolved',
            () => 'rejected',
          ),
          new Promise((r) => setTimeout(() => r('pending'), 50)),
        ]);
        expect(settled).toBe('pending');
        const reason = new Error('shutting down');
        ctl.abort(reason);
        await expect(call$).rejects.toBe(reason);
        // Only that call hung: the next one answers.
        await expect(provider.get(id)).resolves.toMatchObject({ id });
      },
    );

    it('can be cleared', async () => {
      const { provider } = mock();
      provider.failNextCreates(5, 'quota');
      provider.clearFaults();
      await expect(provider.create(req('u'))).resolves.toBeDefined();
    });
  });
});

import {
  NotFoundError,
  ProviderPermanentError,
  QUOTA_RETRY_SECONDS,
  QuotaExceededError,
  TransientError,
  isNotFound,
  isPermanent,
  isProviderError,
  isQuotaExceeded,
  isTransient,
  providerError,
  type ProviderErrorKind,
} from '../../providers/errors.js';

const ctx = { provider: 'gcp-eu', operation: 'get' as const, providerID: 'p/z/proxy-1' };

const guards = { isNotFound, isQuotaExceeded, isTransient, isPermanent };

describe('the provider error taxonomy', () => {
  it.each([
    ['NotFound', new NotFoundError('gone', ctx), 'isNotFound'],
    ['QuotaExceeded', new QuotaExceededError('no CPUs', ctx), 'isQuotaExceeded'],
    ['Transient', new TransientError('503', ctx), 'isTransient'],
    ['Permanent', new ProviderPermanentError('bad image', ctx), 'isPermanent'],
  ] as const)('a %s error satisfies exactly its own guard', (kind, err, guard) => {
    expect(err.kind).toBe(kind);
    expect(isProviderError(err)).toBe(true);
    for (const [name, fn] of Object.entries(guards)) expect([name, fn(err)]).toEqual([name, name === guard]);
  });

  it.each<ProviderErrorKind>(['NotFound', 'QuotaExceeded', 'Transient', 'Permanent'])(
    'providerError(%s) builds the class of that kind',
    (kind) => {
      expect(providerError(kind, 'x', ctx).kind).toBe(kind);
    },
  );

  it('carries provider, operation, providerID and cause, and names them in the message', () => {
    const cause = new Error('HTTP 404');
    const err = new NotFoundError('instance not found', { ...ctx, cause });
    expect(err).toMatchObject({ provider: 'gcp-eu', operation: 'get', providerID: 'p/z/proxy-1', cause });
    expect(err.message).toBe('provider gcp-eu: get p/z/proxy-1: instance not found');
    expect(err).toBeInstanceOf(Error);
  });

  it('leaves the providerID out of the message when there is none', () => {
    expect(new TransientError('timeout', { provider: 'mock', operation: 'listByTag' }).message).toBe(
      'provider mock: listByTag: timeout',
    );
  });

  it.each([undefined, null, 'text', new Error('plain'), { kind: 'NotFound' }])(
    'rejects %p as any taxonomy error',
    (value) => {
      expect(isProviderError(value)).toBe(false);
      for (const fn of Object.values(guards)) expect(fn(value)).toBe(false);
    },
  );

  it('asks callers to wait at least five minutes after a quota error', () => {
    expect(QUOTA_RETRY_SECONDS).toBeGreaterThanOrEqual(300);
  });
});

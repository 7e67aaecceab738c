import { classifyGcpError, httpStatusOf, operationFailure } from '../../../providers/gcp/error-mapping.js';

/** The shape google-gax v7 throws: a gRPC code, the HTTP status alongside. */
const gax = (code: number, httpStatusCode: number | undefined, message = '') =>
  Object.assign(new Error(message), { code, httpStatusCode });
const http = (status: number, message = '') => Object.assign(new Error(message), { code: status });
const net = (code: string) => Object.assign(new Error(code), { code });

describe('GCP errors → taxonomy', () => {
  it.each([
    ['404 (v7: gRPC NOT_FOUND + HTTP 404)', gax(5, 404), 'get', 'NotFound'],
    ['plain HTTP 404 (v5/v6 shape)', http(404), 'delete', 'NotFound'],
    ['gRPC NOT_FOUND without HTTP status', gax(5, undefined), 'get', 'NotFound'],
    ['409 on insert (v7: ABORTED + 409)', gax(10, 409, 'already exists'), 'insert', 'AlreadyExists'],
    ['409 outside insert', gax(10, 409), 'delete', 'Transient'],
    ['ALREADY_EXISTS on insert', gax(6, undefined), 'insert', 'AlreadyExists'],
    ['429', gax(8, 429, 'Too Many Requests'), 'get', 'Transient'],
    ['403 rateLimitExceeded', gax(7, 403, 'Rate Limit Exceeded: rateLimitExceeded'), 'insert', 'Transient'],
    ['403 userRateLimitExceeded', http(403, 'userRateLimitExceeded'), 'list', 'Transient'],
    [
      '403 quota',
      gax(7, 403, "Quota 'CPUS' exceeded. Limit: 8.0 in region europe-west1."),
      'insert',
      'QuotaExceeded',
    ],
    ['QUOTA_EXCEEDED in the message', gax(8, 403, 'QUOTA_EXCEEDED'), 'insert', 'QuotaExceeded'],
    ['ZONE_RESOURCE_POOL_EXHAUSTED', gax(8, 503, 'ZONE_RESOURCE_POOL_EXHAUSTED'), 'insert', 'QuotaExceeded'],
    ['other 403', gax(7, 403, 'Required permission compute.instances.create'), 'insert', 'Permanent'],
    ['400 bad image', gax(3, 400, 'Invalid value for field image'), 'insert', 'Permanent'],
    ['400 bad machine type', http(400, 'Invalid value for field machineType'), 'insert', 'Permanent'],
    ['gRPC INVALID_ARGUMENT without HTTP', gax(3, undefined), 'insert', 'Permanent'],
    ['gRPC PERMISSION_DENIED without HTTP', gax(7, undefined), 'get', 'Permanent'],
    ['401 (token refresh)', gax(16, 401), 'get', 'Transient'],
    [
      '400 resourceNotReady on delete (an operation in flight)',
      gax(3, 400, "The resource 'projects/p/zones/z/instances/proxy-1' is not ready"),
      'delete',
      'Transient',
    ],
    [
      '400 resourceNotReady on get',
      gax(3, 400, "The resource 'projects/p/zones/z/instances/proxy-1' is not ready"),
      'get',
      'Transient',
    ],
    [
      '400 resourceNotReady on insert',
      gax(3, 400, "The resource 'projects/p/zones/z/disks/proxy-1' is not ready"),
      'insert',
      'Transient',
    ],
    [
      '400 with the legacy reason resourceNotReady (v5/v6 shape)',
      Object.assign(new Error('Bad Request'), { code: 400, errors: [{ reason: 'resourceNotReady' }] }),
      'delete',
      'Transient',
    ],
    [
      'gRPC INVALID_ARGUMENT saying resourceNotReady',
      gax(3, undefined, 'resourceNotReady'),
      'get',
      'Transient',
    ],
    ['500', gax(13, 500), 'get', 'Transient'],
    ['503', http(503), 'insert', 'Transient'],
    ['gRPC UNAVAILABLE', gax(14, undefined), 'get', 'Transient'],
    ['gRPC DEADLINE_EXCEEDED', gax(4, undefined), 'insert', 'Transient'],
    ['ECONNRESET', net('ECONNRESET'), 'get', 'Transient'],
    ['ETIMEDOUT', net('ETIMEDOUT'), 'list', 'Transient'],
    ['ENOTFOUND', net('ENOTFOUND'), 'insert', 'Transient'],
    ['an unknown shape', new Error('???'), 'get', 'Transient'],
    ['a non-error', 'boom', 'get', 'Transient'],
  ] as const)('%s on %s is %s', (_case, err, op, kind) => {
    expect(classifyGcpError(err, op)).toBe(kind);
  });

  it.each([
    [{ httpStatusCode: 409, code: 10 }, 409],
    [{ status: 404 }, 404],
    [{ response: { status: 503 } }, 503],
    [{ code: 400 }, 400],
    [{ code: 14 }, undefined],
    [{ status: 'NOT_FOUND' }, undefined],
  ])('reads the HTTP status of %p as %p', (err, status) => {
    expect(httpStatusOf(err)).toBe(status);
  });
});

describe('a finished insert operation', () => {
  const done = (...codes: string[]) => ({
    status: 'DONE' as const,
    error: { errors: codes.map((code) => ({ code, message: `${code} happened` })) },
  });

  it.each([
    [['QUOTA_EXCEEDED'], 'QuotaExceeded'],
    [['ZONE_RESOURCE_POOL_EXHAUSTED'], 'QuotaExceeded'],
    [['ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS'], 'QuotaExceeded'],
    [['INTERNAL_ERROR', 'QUOTA_EXCEEDED'], 'QuotaExceeded'],
    [['INTERNAL_ERROR'], 'Transient'],
    [['SERVICE_UNAVAILABLE'], 'Transient'],
    [['RESOURCE_NOT_FOUND'], 'Permanent'],
    [['INVALID_FIELD_VALUE'], 'Permanent'],
  ])('failing with %p means %s', (codes, kind) => {
    const failure = operationFailure(done(...codes));
    expect(failure?.kind).toBe(kind);
    expect(failure?.message).toContain(`${codes[0]}: ${codes[0]} happened`);
  });

  it.each([
    ['still running', { status: 'RUNNING' as const }],
    ['done without errors', { status: 'DONE' as const }],
    ['done with an empty error list', { status: 'DONE' as const, error: { errors: [] } }],
  ])('%s is no failure', (_case, op) => {
    expect(operationFailure(op)).toBeUndefined();
  });
});

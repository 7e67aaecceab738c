import { NETWORK_ERROR_CODES, isNetworkError, type ProviderErrorKind } from '../plugin.js';

/** Error codes by what they mean to the operator (docs/providers.md has the table). */
const BY_CODE: ReadonlyArray<[ProviderErrorKind, RegExp]> = [
  ['NotFound', /^InvalidInstanceID\.(NotFound|Malformed)$/],
  [
    'QuotaExceeded',
    /^(InsufficientInstanceCapacity|InsufficientCapacity|InstanceLimitExceeded|VcpuLimitExceeded|MaxSpotInstanceCountExceeded|InsufficientAddressCapacity|AddressLimitExceeded|InsufficientFreeAddressesInSubnet)$/,
  ],
  [
    'Transient',
    /^(RequestLimitExceeded|Throttling|ThrottlingException|TooManyRequestsException|ServiceUnavailable|Unavailable|InternalError|InternalFailure|RequestTimeout|RequestTimeoutException|RequestExpired|ExpiredToken|ExpiredTokenException|IncorrectState|IncorrectInstanceState|TimeoutError)$/,
  ],
  [
    'Permanent',
    /^(UnauthorizedOperation|AuthFailure|InvalidClientTokenId|SignatureDoesNotMatch|OptInRequired|Blocked|PendingVerification|InvalidParameterValue|InvalidParameterCombination|InvalidParameter|MissingParameter|UnknownParameter|InvalidAMIID\..*|InvalidSubnetID\..*|InvalidSubnet|InvalidGroup\..*|InvalidGroupId\..*|InvalidKeyPair\..*|InvalidUserData\..*|UnsupportedOperation|Unsupported|IdempotentParameterMismatch|InvalidAMIName\..*|InvalidBlockDeviceMapping|VPCIdNotSpecified)$/,
  ],
];

interface AwsErrorShape {
  name?: unknown;
  Code?: unknown;
  code?: unknown;
  $fault?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

/** The EC2 error code (the SDK puts it in `name`), or a network error code. */
export function awsErrorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as AwsErrorShape;
  for (const v of [e.Code, e.name, e.code]) if (typeof v === 'string' && v !== 'Error') return v;
  return undefined;
}

/**
 * An EC2 call's failure → taxonomy: the code table first, then network codes and 5xx
 * (Transient), then client faults with 4xx (Permanent). Anything else is Transient: retrying
 * with backoff is harmless, failing a Proxy on a shape never seen is not.
 */
export function classifyAwsError(err: unknown): ProviderErrorKind {
  const code = awsErrorCode(err);
  for (const [kind, pattern] of BY_CODE) if (code && pattern.test(code)) return kind;
  if (typeof err !== 'object' || err === null) return 'Transient';
  const e = err as AwsErrorShape;
  const status = typeof e.$metadata?.httpStatusCode === 'number' ? e.$metadata.httpStatusCode : undefined;
  if (isNetworkError(err) || (code && NETWORK_ERROR_CODES.has(code))) return 'Transient';
  if (status !== undefined && status >= 500) return 'Transient';
  if (e.$fault === 'client' && status !== undefined && status >= 400 && status !== 429) return 'Permanent';
  return 'Transient';
}

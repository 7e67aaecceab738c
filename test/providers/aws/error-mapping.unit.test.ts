import { awsErrorCode, classifyAwsError } from '../../../providers/aws/error-mapping.js';

/** The shape @aws-sdk v3 throws for an EC2 error answer: the code as `name`, HTTP status in $metadata. */
const ec2 = (
  code: string,
  status: number,
  fault: 'client' | 'server' = status >= 500 ? 'server' : 'client',
) =>
  Object.assign(new Error(`${code} happened`), {
    name: code,
    $fault: fault,
    $metadata: { httpStatusCode: status },
  });
const net = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code });

describe('EC2 errors → taxonomy', () => {
  it.each([
    // capacity and instance limits
    ['InsufficientInstanceCapacity', ec2('InsufficientInstanceCapacity', 500, 'server'), 'QuotaExceeded'],
    ['InstanceLimitExceeded', ec2('InstanceLimitExceeded', 400), 'QuotaExceeded'],
    ['VcpuLimitExceeded', ec2('VcpuLimitExceeded', 400), 'QuotaExceeded'],
    ['MaxSpotInstanceCountExceeded', ec2('MaxSpotInstanceCountExceeded', 400), 'QuotaExceeded'],
    ['InsufficientFreeAddressesInSubnet', ec2('InsufficientFreeAddressesInSubnet', 400), 'QuotaExceeded'],
    ['AddressLimitExceeded', ec2('AddressLimitExceeded', 400), 'QuotaExceeded'],
    // throttling, 5xx, network
    ['RequestLimitExceeded (throttling)', ec2('RequestLimitExceeded', 503), 'Transient'],
    ['Throttling', ec2('Throttling', 400), 'Transient'],
    ['ServiceUnavailable', ec2('ServiceUnavailable', 503), 'Transient'],
    ['Unavailable', ec2('Unavailable', 503), 'Transient'],
    ['InternalError', ec2('InternalError', 500), 'Transient'],
    ['an unknown 5xx code', ec2('SomethingBroke', 502), 'Transient'],
    ['RequestExpired (clock skew)', ec2('RequestExpired', 400), 'Transient'],
    ['ExpiredToken (credentials refresh)', ec2('ExpiredToken', 400), 'Transient'],
    ['IncorrectInstanceState (an operation in flight)', ec2('IncorrectInstanceState', 400), 'Transient'],
    ['ECONNREFUSED', net('ECONNREFUSED'), 'Transient'],
    ['ECONNRESET', net('ECONNRESET'), 'Transient'],
    ['ETIMEDOUT', net('ETIMEDOUT'), 'Transient'],
    ['the SDK TimeoutError', Object.assign(new Error('timed out'), { name: 'TimeoutError' }), 'Transient'],
    // unknown instance
    ['InvalidInstanceID.NotFound', ec2('InvalidInstanceID.NotFound', 400), 'NotFound'],
    ['InvalidInstanceID.Malformed', ec2('InvalidInstanceID.Malformed', 400), 'NotFound'],
    // authorization and invalid parameters
    ['UnauthorizedOperation', ec2('UnauthorizedOperation', 403), 'Permanent'],
    ['AuthFailure', ec2('AuthFailure', 401), 'Permanent'],
    ['InvalidClientTokenId', ec2('InvalidClientTokenId', 403), 'Permanent'],
    ['InvalidParameterValue (bad instance type)', ec2('InvalidParameterValue', 400), 'Permanent'],
    ['InvalidParameterCombination', ec2('InvalidParameterCombination', 400), 'Permanent'],
    ['MissingParameter', ec2('MissingParameter', 400), 'Permanent'],
    ['InvalidAMIID.NotFound', ec2('InvalidAMIID.NotFound', 400), 'Permanent'],
    ['InvalidAMIID.Malformed', ec2('InvalidAMIID.Malformed', 400), 'Permanent'],
    ['InvalidSubnetID.NotFound', ec2('InvalidSubnetID.NotFound', 400), 'Permanent'],
    ['InvalidGroup.NotFound', ec2('InvalidGroup.NotFound', 400), 'Permanent'],
    ['OptInRequired', ec2('OptInRequired', 403), 'Permanent'],
    ['an unknown client fault with 400', ec2('SomethingWrongWithTheRequest', 400), 'Permanent'],
    // unknown shapes
    ['an unknown error', new Error('???'), 'Transient'],
    ['a non-error', 'boom', 'Transient'],
    ['an unknown 429', ec2('Whatever', 429), 'Transient'],
  ])('%s is %s', (_case, err, kind) => {
    expect(classifyAwsError(err)).toBe(kind);
  });

  it.each([
    [ec2('InvalidInstanceID.NotFound', 400), 'InvalidInstanceID.NotFound'],
    [net('ECONNREFUSED'), 'ECONNREFUSED'],
    [new Error('plain'), undefined],
    [undefined, undefined],
  ])('reads the code of %p as %p', (err, code) => {
    expect(awsErrorCode(err)).toBe(code);
  });
});

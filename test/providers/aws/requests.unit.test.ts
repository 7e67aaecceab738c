import { AWS_DEFAULTS, type AwsSettings } from '../../../providers/aws/config.js';
import { ec2State, toInstance } from '../../../providers/aws/instance-view.js';
import {
  buildRunInstances,
  clientToken,
  missingField,
  ownedFilters,
  parseProviderID,
  USER_DATA_MAX_BYTES,
} from '../../../providers/aws/requests.js';
import type { CreateRequest } from '../../../providers/contract.js';
import { instanceName } from '../../../providers/naming.js';

const settings: AwsSettings = {
  ...AWS_DEFAULTS,
  region: 'eu-west-1',
  securityGroupIds: ['sg-0123456789abcdef0'],
};
const UID = '0b5a3c1e-8d2f-4c6a-9e7b-1f2d3c4b5a69';
const request: CreateRequest = {
  uid: UID,
  revision: 'abcdef0123',
  proxy: 'fleet/eu-1',
  namespace: 'fleet',
  owner: 'prod',
  port: 3128,
  cloudInit: '#cloud-config\npackages: [squid]\n',
  placement: { region: 'eu-west-1', zone: 'eu-west-1b', machineType: 't3.micro', image: 'ami-0abc' },
};
const NAME = instanceName(UID, 'abcdef0123');

describe('the RunInstances request', () => {
  it('carries the GC tags, the Name, the owning Proxy, base64 cloud-init, type, image, zone and security groups', () => {
    const input = buildRunInstances(request, settings, 'token-1');
    expect(input).toEqual({
      ImageId: 'ami-0abc',
      InstanceType: 't3.micro',
      MinCount: 1,
      MaxCount: 1,
      ClientToken: 'token-1',
      UserData: Buffer.from(request.cloudInit!).toString('base64'),
      SecurityGroupIds: ['sg-0123456789abcdef0'],
      Placement: { AvailabilityZone: 'eu-west-1b' },
      TagSpecifications: [
        {
          ResourceType: 'instance',
          Tags: expect.arrayContaining([
            { Key: 'proxy-operator-managed', Value: 'true' },
            { Key: 'proxy-operator-uid', Value: UID },
            { Key: 'proxy-operator-owner', Value: 'prod' },
            { Key: 'proxy-operator-namespace', Value: 'fleet' },
            { Key: 'proxy-operator-revision', Value: 'abcdef0123' },
            { Key: 'Name', Value: NAME },
            { Key: 'proxy-operator-proxy', Value: 'fleet/eu-1' },
          ]),
        },
      ],
    });
  });

  it('launches into the configured subnet with a public IP on the interface', () => {
    const input = buildRunInstances(request, { ...settings, subnetId: 'subnet-0123456789abcdef0' }, 't');
    expect(input.NetworkInterfaces).toEqual([
      {
        DeviceIndex: 0,
        SubnetId: 'subnet-0123456789abcdef0',
        Groups: ['sg-0123456789abcdef0'],
        AssociatePublicIpAddress: true,
        DeleteOnTermination: true,
      },
    ]);
    expect(input.SecurityGroupIds).toBeUndefined();
    expect(input.Placement).toBeUndefined();
  });

  it('takes the instance type and image from the config when the placement has none', () => {
    const input = buildRunInstances(
      { ...request, placement: {} },
      { ...settings, instanceType: 't3.small', imageId: 'ami-0def' },
      't',
    );
    expect(input).toMatchObject({ InstanceType: 't3.small', ImageId: 'ami-0def' });
  });

  it.each([
    [
      { ...request, placement: { ...request.placement, machineType: undefined } },
      'placement.machineType (or aws.instanceType',
    ],
    [{ ...request, placement: { ...request.placement, image: ' ' } }, 'placement.image (or aws.imageId'],
    [
      { ...request, placement: { ...request.placement, region: 'us-east-1' } },
      'placement.region "us-east-1" is not this provider\'s region "eu-west-1"',
    ],
    [{ ...request, port: 0 }, 'port must be 1-65535'],
    [{ ...request, cloudInit: 'x'.repeat(USER_DATA_MAX_BYTES + 1) }, 'EC2 user data is limited to 16384'],
  ])('names what a create is missing: %#', (req, message) => {
    expect(missingField(req, settings)).toContain(message);
  });

  it('needs nothing more for a complete request', () => {
    expect(missingField(request, settings)).toBeUndefined();
  });
});

describe('the client token', () => {
  it('is the same for a repeated create and fits EC2 (<= 64 ASCII characters)', () => {
    expect(clientToken(NAME, [])).toBe(clientToken(NAME, []));
    expect(clientToken(NAME, ['i-2', 'i-1'])).toBe(clientToken(NAME, ['i-1', 'i-2']));
    expect(clientToken(NAME, [])).toMatch(/^[\x21-\x7e]{1,64}$/);
  });

  it('changes once an earlier instance of the name exists, so a terminated launch is never replayed', () => {
    expect(clientToken(NAME, ['i-0123456789abcdef0'])).not.toBe(clientToken(NAME, []));
  });
});

describe('providerIDs and listings', () => {
  it.each([
    ['eu-west-1/i-0123456789abcdef0', { region: 'eu-west-1', instanceId: 'i-0123456789abcdef0' }],
    ['us-gov-west-1/i-01234567', { region: 'us-gov-west-1', instanceId: 'i-01234567' }],
    ['i-0123456789abcdef0', undefined],
    ['eu-west-1/proxy-abc', undefined],
    ['eu-west-1/i-0123/x', undefined],
  ])('parses %p', (id, ref) => {
    expect(parseProviderID(id)).toEqual(ref);
  });

  it("lists one owner's managed instances that still exist", () => {
    expect(ownedFilters('prod')).toEqual([
      { Name: 'tag:proxy-operator-managed', Values: ['true'] },
      { Name: 'tag:proxy-operator-owner', Values: ['prod'] },
      { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] },
    ]);
  });
});

describe('an EC2 instance as the operator sees it', () => {
  it.each([
    ['pending', 'Provisioning'],
    ['running', 'Running'],
    ['stopping', 'Stopped'],
    ['stopped', 'Stopped'],
    ['shutting-down', 'Terminated'],
    ['terminated', 'Terminated'],
    ['some-future-state', 'Provisioning'],
    [undefined, 'Provisioning'],
  ])('state %p is %s', (name, state) => {
    expect(ec2State(name)).toBe(state);
  });

  const ec2Instance = {
    InstanceId: 'i-0123456789abcdef0',
    State: { Name: 'running' as const },
    PublicIpAddress: '54.1.2.3',
    PrivateIpAddress: '10.0.0.7',
    LaunchTime: new Date('2026-01-01T00:00:00Z'),
    Tags: [
      { Key: 'proxy-operator-uid', Value: UID },
      { Key: 'proxy-operator-owner', Value: 'prod' },
      { Key: 'proxy-operator-namespace', Value: 'fleet' },
      { Key: 'proxy-operator-revision', Value: 'abcdef0123' },
    ],
  };

  it('reads ownership from the tags, the launch time and the public address', () => {
    expect(toInstance(ec2Instance, 'eu-west-1', 'public')).toEqual({
      id: 'eu-west-1/i-0123456789abcdef0',
      ip: '54.1.2.3',
      state: 'Running',
      uid: UID,
      owner: 'prod',
      namespace: 'fleet',
      revision: 'abcdef0123',
      createdAt: new Date('2026-01-01T00:00:00Z'),
    });
  });

  it('gives the private address when configured so', () => {
    expect(toInstance(ec2Instance, 'eu-west-1', 'private').ip).toBe('10.0.0.7');
  });
});

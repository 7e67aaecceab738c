import {
  DescribeInstanceAttributeCommand,
  DescribeInstancesCommand,
  EC2Client,
  type Instance as Ec2Instance,
} from '@aws-sdk/client-ec2';
import { pino } from 'pino';
import { AwsProvider } from '../../../providers/aws/aws-provider.js';
import { AWS_DEFAULTS, type AwsSettings } from '../../../providers/aws/config.js';
import type { CreateRequest } from '../../../providers/contract.js';
import { isNotFound, isPermanent, isTransient } from '../../../providers/errors.js';
import { instanceName } from '../../../providers/naming.js';
import { caught } from '../caught.js';
import { startBlackHole } from '../dead-ends.js';
import { startMoto, useTestCredentials, type Moto } from './moto.js';

const logger = pino({ level: 'silent' });
let moto: Moto;
let ec2: EC2Client;
let restoreCredentials: () => void;
const providers: AwsProvider[] = [];

const make = (extra: Partial<AwsSettings> = {}) => {
  const p = new AwsProvider(
    'aws',
    { ...AWS_DEFAULTS, region: 'us-east-1', securityGroupIds: [], endpoint: moto.endpoint, ...extra },
    logger,
  );
  providers.push(p);
  return p;
};

let seq = 0;
const request = (extra: Partial<CreateRequest> = {}): CreateRequest => ({
  uid: `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`,
  revision: 'rev00001',
  proxy: 'fleet/proxy-a',
  namespace: 'fleet',
  owner: 'aws-tests',
  port: 3128,
  cloudInit: '#cloud-config\npackages: [squid]\n',
  placement: { zone: 'us-east-1b', machineType: 't3.small', image: 'ami-12c6146b' },
  ...extra,
});

async function describeAll(): Promise<Ec2Instance[]> {
  const out = await ec2.send(new DescribeInstancesCommand({}));
  return (out.Reservations ?? []).flatMap((r) => r.Instances ?? []);
}
const instanceId = (providerID: string) => providerID.split('/')[1];

beforeAll(async () => {
  restoreCredentials = useTestCredentials();
  moto = await startMoto();
  ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.endpoint });
});
afterAll(async () => {
  ec2?.destroy();
  await Promise.allSettled(providers.map((p) => p.close()));
  await moto?.stop();
  restoreCredentials?.();
});

describe('the aws provider against moto', () => {
  it('launches the instance from the placement, with its tags, user data, type, image and zone', async () => {
    const req = request();
    const id = await make().create(req);
    expect(id).toMatch(/^us-east-1\/i-[0-9a-f]+$/);
    const [vm] = (await describeAll()).filter((i) => i.InstanceId === instanceId(id));
    expect(vm).toMatchObject({
      InstanceType: 't3.small',
      ImageId: 'ami-12c6146b',
      Placement: expect.objectContaining({ AvailabilityZone: 'us-east-1b' }),
    });
    expect(Object.fromEntries((vm.Tags ?? []).map((t) => [t.Key, t.Value]))).toEqual({
      Name: instanceName(req.uid, req.revision),
      'proxy-operator-managed': 'true',
      'proxy-operator-uid': req.uid,
      'proxy-operator-owner': 'aws-tests',
      'proxy-operator-namespace': 'fleet',
      'proxy-operator-revision': 'rev00001',
      'proxy-operator-proxy': 'fleet/proxy-a',
    });
    const userData = await ec2.send(
      new DescribeInstanceAttributeCommand({ InstanceId: instanceId(id), Attribute: 'userData' }),
    );
    expect(Buffer.from(userData.UserData?.Value ?? '', 'base64').toString()).toBe(req.cloudInit);
  });

  it('finds the instance it already launched when a restarted operator repeats the create', async () => {
    const req = request();
    const first = await make().create(req);
    const restarted = make();
    expect(await restarted.create(req)).toBe(first);
    const named = (await describeAll()).filter((i) =>
      i.Tags?.some((t) => t.Key === 'proxy-operator-uid' && t.Value === req.uid),
    );
    expect(named.map((i) => i.InstanceId)).toEqual([instanceId(first)]);
  });

  it('launches a new instance when the one of that name was terminated (never hands back the dead one)', async () => {
    const provider = make();
    const req = request();
    const first = await provider.create(req);
    await provider.delete(first);
    // Terminated is final: get says NotFound, though EC2 still lists the instance for a while.
    expect(isNotFound(await caught(provider.get(first)))).toBe(true);
    expect((await describeAll()).find((i) => i.InstanceId === instanceId(first))?.State?.Name).toBe(
      'terminated',
    );
    const second = await provider.create(req);
    expect(second).not.toBe(first);
    expect((await provider.get(second)).state).toBe('Running');
  });

  it.each([
    ['public', /^(?!10\.)\d+\.\d+\.\d+\.\d+$/],
    ['private', /^10\./],
  ] as const)('reports the %s address', async (addressType, pattern) => {
    const provider = make({ addressType });
    const id = await provider.create(request());
    const instance = await provider.get(id);
    expect(instance.ip).toMatch(pattern);
  });

  it('refuses a create missing its instance type, naming the field, without calling EC2', async () => {
    const before = (await describeAll()).length;
    const err = await caught(make().create(request({ placement: { image: 'ami-12c6146b' } })));
    expect(isPermanent(err)).toBe(true);
    expect((err as Error).message).toContain('placement.machineType (or aws.instanceType');
    expect((await describeAll()).length).toBe(before);
  });

  it('maps EC2 refusing a launch (an unknown subnet) to Permanent, with EC2 code and message', async () => {
    const err = await caught(make({ subnetId: 'subnet-0123456789abcdef0' }).create(request()));
    expect(isPermanent(err)).toBe(true);
    expect((err as Error).message).toContain('InvalidSubnetID.NotFound');
  });

  it('says NotFound for an instance EC2 does not know, and Permanent for an ID that is not one of its own', async () => {
    const provider = make();
    expect(isNotFound(await caught(provider.get('us-east-1/i-0123456789abcdef0')))).toBe(true);
    expect(isPermanent(await caught(provider.get('proxy-abc')))).toBe(true);
    expect(isPermanent(await caught(provider.delete('fleet/proxy-abc')))).toBe(true);
  });
});

describe('the aws provider and a silent endpoint', () => {
  it('cancels the request itself when the signal aborts: the connection closes', async () => {
    const blackHole = await startBlackHole();
    const provider = make({ endpoint: `http://127.0.0.1:${blackHole.port}` });
    try {
      const ctl = new AbortController();
      const pending = provider.get('us-east-1/i-0123456789abcdef0', ctl.signal);
      pending.catch(() => undefined);
      for (let i = 0; blackHole.requested() === 0; i++) {
        if (i > 500) throw new Error('the request never arrived');
        await new Promise((r) => setTimeout(r, 20));
      }
      const reason = new Error('shutdown');
      ctl.abort(reason);
      await expect(pending).rejects.toBe(reason);
      for (let i = 0; blackHole.open() > 0; i++) {
        if (i > 250) throw new Error('the connection stayed open after the abort');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await blackHole.close();
    }
  });

  it('gives up after requestTimeoutSeconds with a Transient error', async () => {
    const blackHole = await startBlackHole();
    try {
      const provider = make({ endpoint: `http://127.0.0.1:${blackHole.port}`, requestTimeoutSeconds: 1 });
      const started = Date.now();
      const err = await caught(provider.listByTag('aws-tests'));
      expect(isTransient(err)).toBe(true);
      expect((err as Error).message).toContain('no answer from EC2 within 1 s');
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await blackHole.close();
    }
  });
});

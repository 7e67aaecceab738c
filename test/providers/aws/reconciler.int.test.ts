import { DescribeInstancesCommand, EC2Client, type Instance as Ec2Instance } from '@aws-sdk/client-ec2';
import type { LocalTarget } from '../../../cmd/demo/local-target.js';
import { FINALIZER } from '../../../crds/proxy-types.js';
import { ProxyController } from '../../../handlers/proxy-controller.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../../handlers/settings.js';
import { AwsProvider } from '../../../providers/aws/aws-provider.js';
import { AWS_DEFAULTS } from '../../../providers/aws/config.js';
import type { ProxyApi } from '../../crd/proxy-api.js';
import {
  condition,
  deleteProxy,
  eventually,
  managedSpec,
  quiet,
  startOperator,
  suiteSetup,
  type RunningOperator,
} from '../../handlers/operator-fixture.js';
import { testKubeConfig, uniqueName } from '../../harness/kube.js';
import { startMoto, useTestCredentials, type Moto } from './moto.js';

// A Managed Proxy on the aws provider, reconciled by the real operator against a real API
// server, with EC2 played by moto on loopback. Only the reconciler runs: moto's instances
// have made-up public IPs, which nothing here may probe.
const kc = testKubeConfig();
const namespace = uniqueName('aws-reconciler');
let api: ProxyApi;
let target: LocalTarget;
let moto: Moto;
let ec2: EC2Client;
let provider: AwsProvider;
let op: RunningOperator;
let restoreCredentials: () => void;

beforeAll(async () => {
  restoreCredentials = useTestCredentials();
  moto = await startMoto();
  ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.endpoint });
  ({ api, target } = await suiteSetup(kc, namespace));
  provider = new AwsProvider(
    'aws',
    { ...AWS_DEFAULTS, region: 'us-east-1', securityGroupIds: [], endpoint: moto.endpoint },
    quiet,
  );
  op = await startOperator(kc, { aws: provider }, namespace, {}, [ProxyController]);
});

afterAll(async () => {
  await op?.stop();
  await provider?.close();
  ec2?.destroy();
  await target?.close();
  await moto?.stop();
  restoreCredentials?.();
});

async function ec2Instance(providerID: string): Promise<Ec2Instance | undefined> {
  const out = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [providerID.split('/')[1]] }));
  return out.Reservations?.[0]?.Instances?.[0];
}

const spec = (machineType: string) =>
  managedSpec(target, {
    provider: 'aws',
    placement: { region: 'us-east-1', zone: 'us-east-1a', machineType, image: 'ami-12c6146b' },
  });

describe('a Managed Proxy on aws', () => {
  it('is launched on EC2, replaced on a spec change, and terminated on delete', async () => {
    const created = await api.create('aws-proxy', { spec: spec('t3.micro') });

    const provisioned = await eventually('the instance launched and running', async () => {
      const p = await api.get('aws-proxy');
      return condition(p, 'Provisioned')?.status === 'True' ? p : undefined;
    });
    const firstID = provisioned.status!.providerID!;
    expect(firstID).toMatch(/^us-east-1\/i-[0-9a-f]+$/);
    expect(provisioned.metadata.finalizers).toContain(FINALIZER);
    expect(provisioned.status?.ip).toBeTruthy();
    const first = await ec2Instance(firstID);
    expect(first?.InstanceType).toBe('t3.micro');
    expect(Object.fromEntries((first?.Tags ?? []).map((t) => [t.Key, t.Value]))).toMatchObject({
      'proxy-operator-uid': created.metadata.uid,
      'proxy-operator-owner': DEFAULT_HANDLER_SETTINGS.ownerID,
      'proxy-operator-namespace': namespace,
      'proxy-operator-proxy': `${namespace}/aws-proxy`,
    });

    await api.patchSpec('aws-proxy', { placement: { machineType: 't3.small' } });
    const replaced = await eventually('a new instance for the new spec', async () => {
      const p = await api.get('aws-proxy');
      const id = p.status?.providerID;
      return id && id !== firstID && condition(p, 'Provisioned')?.status === 'True' ? p : undefined;
    });
    const secondID = replaced.status!.providerID!;
    expect((await ec2Instance(secondID))?.InstanceType).toBe('t3.small');
    expect((await ec2Instance(firstID))?.State?.Name).toBe('terminated');

    await deleteProxy(kc, namespace, 'aws-proxy');
    await eventually('the Proxy gone (finalizer released)', async () =>
      api.get('aws-proxy').then(
        () => undefined,
        (err: { code?: number }) => (err.code === 404 ? true : undefined),
      ),
    );
    expect((await ec2Instance(secondID))?.State?.Name).toBe('terminated');
  });
});

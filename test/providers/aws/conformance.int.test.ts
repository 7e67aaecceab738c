import { EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { pino } from 'pino';
import type { AwsSettings } from '../../../providers/aws/config.js';
import { AWS_DEFAULTS } from '../../../providers/aws/config.js';
import { AwsProvider } from '../../../providers/aws/aws-provider.js';
import { describeProviderConformance } from '../../../providers/conformance/index.js';
import { LABEL_MANAGED, LABEL_UID } from '../../../providers/contract.js';
import { closedPort, startBlackHole, type BlackHole } from '../dead-ends.js';
import { startMoto, useTestCredentials, type Moto } from './moto.js';

const logger = pino({ level: 'silent' });
let moto: Moto;
let blackHole: BlackHole | undefined;
let restoreCredentials: () => void;
const providers: AwsProvider[] = [];

const settings = (endpoint: string, extra: Partial<AwsSettings> = {}): AwsSettings => ({
  ...AWS_DEFAULTS,
  region: 'us-east-1',
  securityGroupIds: [],
  endpoint,
  ...extra,
});
const make = (s: AwsSettings) => {
  const p = new AwsProvider('aws', s, logger);
  providers.push(p);
  return p;
};

/** Launches an instance behind the provider's back, with only these tags. */
async function launchForeign(tags: Record<string, string>): Promise<void> {
  const ec2 = new EC2Client({ region: 'us-east-1', endpoint: moto.endpoint });
  try {
    await ec2.send(
      new RunInstancesCommand({
        ImageId: 'ami-12c6146b',
        InstanceType: 't3.micro',
        MinCount: 1,
        MaxCount: 1,
        TagSpecifications: [
          { ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
        ],
      }),
    );
  } finally {
    ec2.destroy();
  }
}

// EC2 through moto's server on loopback (started here, once for the file). moto runs an
// instance at once, so "create returns before it runs" is checked by the state mapping's
// unit table (pending → Provisioning), not here.
describeProviderConformance({
  name: 'aws',
  provider: async () => {
    restoreCredentials = useTestCredentials();
    moto = await startMoto();
    return make(settings(moto.endpoint));
  },
  placement: { region: 'us-east-1', zone: 'us-east-1a', machineType: 't3.micro', image: 'ami-12c6146b' },
  unknownID: 'us-east-1/i-0123456789abcdef0',
  unresponsive: async () => {
    blackHole = await startBlackHole();
    return make(settings(`http://127.0.0.1:${blackHole.port}`));
  },
  failing: async () => make(settings(`http://127.0.0.1:${await closedPort()}`, { requestTimeoutSeconds: 5 })),
  seedForeign: async (owner) => {
    await launchForeign({ Name: `foreign-${owner}`, team: 'not-ours' });
    await launchForeign({
      Name: `unowned-${owner}`,
      [LABEL_MANAGED]: 'true',
      [LABEL_UID]: 'from-before-owners',
    });
  },
  teardown: async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await blackHole?.close();
    await moto?.stop();
    restoreCredentials?.();
  },
});

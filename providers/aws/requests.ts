import { createHash } from 'node:crypto';
import type { RunInstancesCommandInput, Filter, _InstanceType } from '@aws-sdk/client-ec2';
import {
  gcLabels,
  instanceName,
  LABEL_MANAGED,
  LABEL_OWNER,
  LABEL_UID,
  type CreateRequest,
} from '../plugin.js';
import type { AwsSettings } from './config.js';

/** The tag naming the owning Proxy (namespace/name), for humans in the console. */
export const TAG_PROXY = 'proxy-operator-proxy';

/** EC2 caps user data at 16 KiB before base64. */
export const USER_DATA_MAX_BYTES = 16 * 1024;

/** States of an instance that is gone or going: never the answer to a create. */
export const GONE_STATES = new Set(['shutting-down', 'terminated']);

/** providerID = "<region>/<instance ID>": all get/delete need. */
export function formatProviderID(region: string, instanceId: string): string {
  return `${region}/${instanceId}`;
}

export function parseProviderID(providerID: string): { region: string; instanceId: string } | undefined {
  const m = /^([a-z]{2}(?:-[a-z]+)+-\d)\/(i-[0-9a-f]{8,17})$/.exec(providerID);
  return m ? { region: m[1], instanceId: m[2] } : undefined;
}

/** What a create is missing, named as the person fixing it would look for it; undefined when complete. */
export function missingField(req: CreateRequest, settings: AwsSettings): string | undefined {
  if (!req.placement.machineType?.trim() && !settings.instanceType)
    return 'placement.machineType (or aws.instanceType in the providers file) is required for AWS';
  if (!req.placement.image?.trim() && !settings.imageId)
    return 'placement.image (or aws.imageId in the providers file) is required for AWS';
  if (req.placement.region && req.placement.region !== settings.region)
    return `placement.region "${req.placement.region}" is not this provider's region "${settings.region}" (one provider entry per region)`;
  if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535)
    return `port must be 1-65535, got ${req.port}`;
  if (req.cloudInit && Buffer.byteLength(req.cloudInit) > USER_DATA_MAX_BYTES)
    return `cloud-init is ${Buffer.byteLength(req.cloudInit)} bytes; EC2 user data is limited to ${USER_DATA_MAX_BYTES}`;
  return undefined;
}

/** Finds the instances a create may already have made: same name, same Proxy UID. */
export function sameNameFilters(req: CreateRequest): Filter[] {
  return [
    { Name: 'tag:Name', Values: [instanceName(req.uid, req.revision)] },
    { Name: `tag:${LABEL_UID}`, Values: [req.uid] },
  ];
}

/** Lists one owner's managed instances that still exist (terminated ones linger in listings). */
export function ownedFilters(owner: string): Filter[] {
  return [
    { Name: `tag:${LABEL_MANAGED}`, Values: ['true'] },
    { Name: `tag:${LABEL_OWNER}`, Values: [owner] },
    { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped', 'shutting-down'] },
  ];
}

/**
 * The RunInstances idempotency token. Derived from the instance name, so a create repeated
 * after a crash (before DescribeInstances shows the first) gets the first instance back; and
 * from the IDs of same-name instances already made, so re-creating after a termination never
 * replays the old token (EC2 would hand back the terminated instance). <= 64 ASCII chars.
 */
export function clientToken(name: string, earlierInstanceIds: readonly string[]): string {
  const digest = createHash('sha256')
    .update([name, ...[...earlierInstanceIds].sort()].join('\n'))
    .digest('hex');
  return `${name}-${digest.slice(0, 16)}`;
}

/** The RunInstances request for a Proxy. Call missingField() first. */
export function buildRunInstances(
  req: CreateRequest,
  settings: AwsSettings,
  token: string,
): RunInstancesCommandInput {
  const name = instanceName(req.uid, req.revision);
  const tags = { ...gcLabels(req), Name: name, [TAG_PROXY]: req.proxy };
  const groups = settings.securityGroupIds.length > 0 ? settings.securityGroupIds : undefined;
  const network: Partial<RunInstancesCommandInput> = settings.subnetId
    ? {
        NetworkInterfaces: [
          {
            DeviceIndex: 0,
            SubnetId: settings.subnetId,
            Groups: groups,
            AssociatePublicIpAddress: settings.assignPublicIp,
            DeleteOnTermination: true,
          },
        ],
      }
    : {
        SecurityGroupIds: groups,
        ...(req.placement.zone ? { Placement: { AvailabilityZone: req.placement.zone } } : {}),
      };
  return {
    ImageId: req.placement.image?.trim() || settings.imageId,
    InstanceType: (req.placement.machineType?.trim() || settings.instanceType) as _InstanceType,
    MinCount: 1,
    MaxCount: 1,
    ClientToken: token,
    ...(req.cloudInit ? { UserData: Buffer.from(req.cloudInit).toString('base64') } : {}),
    TagSpecifications: [
      { ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) },
    ],
    ...network,
  };
}

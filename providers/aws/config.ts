import type { ConfigObject } from '../plugin.js';

export type AddressType = 'public' | 'private';

export interface AwsSettings {
  /** The region this provider manages (one provider entry per region). */
  region: string;
  /** Launch into this subnet (its VPC and zone); the default VPC when unset. */
  subnetId?: string;
  /** Security groups for the instances: what allows the proxy port. */
  securityGroupIds: string[];
  /** Instance type when a Proxy's placement.machineType is unset. */
  instanceType?: string;
  /** AMI when a Proxy's placement.image is unset. */
  imageId?: string;
  /** Which address a Proxy gets: the public IP (crawlers outside the VPC) or the private one. */
  addressType: AddressType;
  /** Ask for a public IP on the instance's interface (with subnetId; the default VPC assigns one anyway). */
  assignPublicIp: boolean;
  /** Another EC2 endpoint: a VPC endpoint, LocalStack, or moto in tests. */
  endpoint?: string;
  /** Deadline of one API call, retries included. */
  requestTimeoutSeconds: number;
}

export const AWS_DEFAULTS = {
  addressType: 'public',
  assignPublicIp: true,
  requestTimeoutSeconds: 30,
} as const;

const REGION = /^[a-z]{2}(-[a-z]+)+-\d$/;
const SUBNET = /^subnet-[0-9a-f]{8,17}$/;
const SECURITY_GROUP = /^sg-[0-9a-f]{8,17}$/;

/**
 * Reads the `aws:` block. Credentials are never configured here: they come from the standard
 * AWS chain (environment, web identity / IRSA, EKS Pod Identity, shared config, instance role).
 */
export function parseAwsConfig(block: ConfigObject): AwsSettings {
  const region = block.requiredString('region');
  if (!REGION.test(region)) block.fail('region', `"${region}" is not an AWS region name (e.g. us-east-1)`);
  const subnetId = block.optionalString('subnetId');
  if (subnetId !== undefined && !SUBNET.test(subnetId))
    block.fail('subnetId', `"${subnetId}" is not a subnet ID (subnet-…)`);
  const securityGroupIds = block.stringList('securityGroupIds', []);
  securityGroupIds.forEach((id, i) => {
    if (!SECURITY_GROUP.test(id))
      block.fail(`securityGroupIds[${i}]`, `"${id}" is not a security group ID (sg-…)`);
  });
  const endpoint = block.optionalString('endpoint');
  if (endpoint !== undefined && !/^https?:\/\/[^/\s]+/.test(endpoint))
    block.fail('endpoint', `"${endpoint}" must be an http(s) URL`);
  return {
    region,
    subnetId,
    securityGroupIds,
    instanceType: block.optionalString('instanceType'),
    imageId: block.optionalString('imageId'),
    addressType: block.oneOf('addressType', ['public', 'private'] as const, AWS_DEFAULTS.addressType),
    assignPublicIp: block.boolean('assignPublicIp', AWS_DEFAULTS.assignPublicIp),
    endpoint,
    requestTimeoutSeconds: block.number('requestTimeoutSeconds', AWS_DEFAULTS.requestTimeoutSeconds, {
      min: 1,
      max: 600,
    }),
  };
}

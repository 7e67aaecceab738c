import type { Instance as Ec2Instance } from '@aws-sdk/client-ec2';
import { ownershipFromLabels, type Instance, type InstanceState } from '../plugin.js';
import type { AddressType } from './config.js';
import { formatProviderID } from './requests.js';

/** EC2 instance state → contract state. */
const STATE_BY_NAME: Record<string, InstanceState> = {
  pending: 'Provisioning',
  running: 'Running',
  stopping: 'Stopped',
  stopped: 'Stopped',
  'shutting-down': 'Terminated',
  terminated: 'Terminated',
};

export function ec2State(name: string | undefined): InstanceState {
  // A state added later is most likely transitional: keep waiting rather than replace.
  return STATE_BY_NAME[name ?? ''] ?? 'Provisioning';
}

export function tagsOf(instance: Ec2Instance): Record<string, string> {
  return Object.fromEntries((instance.Tags ?? []).map((t) => [t.Key ?? '', t.Value ?? '']));
}

export function toInstance(instance: Ec2Instance, region: string, addressType: AddressType): Instance {
  return {
    id: formatProviderID(region, instance.InstanceId ?? ''),
    ip: (addressType === 'public' ? instance.PublicIpAddress : instance.PrivateIpAddress) ?? '',
    state: ec2State(instance.State?.Name),
    ...ownershipFromLabels(tagsOf(instance)),
    createdAt: instance.LaunchTime ?? new Date(0),
  };
}

import { ownershipFromLabels, type Instance, type InstanceState } from '../contract.js';
import type { GcpInstance } from './compute-api.js';
import { formatProviderID, lastSegment } from './requests.js';

/**
 * Compute Engine status → contract state. GCP's TERMINATED means "stopped" (it can be started
 * again), so it maps to Stopped; a preempted or stopped proxy is replaced by the reconciler anyway.
 */
const STATE_BY_STATUS: Record<string, InstanceState> = {
  PROVISIONING: 'Provisioning',
  STAGING: 'Provisioning',
  REPAIRING: 'Provisioning',
  RUNNING: 'Running',
  STOPPING: 'Stopped',
  STOPPED: 'Stopped',
  SUSPENDING: 'Stopped',
  SUSPENDED: 'Stopped',
  TERMINATED: 'Stopped',
};

export function gcpState(status: string | null | undefined): InstanceState {
  // An unknown future status is most likely a transitional one: keep waiting rather than replace.
  return STATE_BY_STATUS[status ?? ''] ?? 'Provisioning';
}

export function toInstance(vm: GcpInstance, project: string): Instance {
  const created = Date.parse(vm.creationTimestamp ?? '');
  return {
    id: formatProviderID({ project, zone: lastSegment(vm.zone), instance: vm.name ?? '' }),
    ip: vm.networkInterfaces?.[0]?.accessConfigs?.[0]?.natIP ?? '',
    state: gcpState(vm.status),
    ...ownershipFromLabels(vm.labels ?? undefined),
    createdAt: new Date(Number.isNaN(created) ? 0 : created),
  };
}

import type { V1Pod } from '@kubernetes/client-node';
import { ownershipFromLabels, type Instance, type InstanceState } from '../contract.js';

/** Pod → contract state: Running means Ready (Squid accepts), a finished Pod is Terminated. */
export function podState(pod: V1Pod): InstanceState {
  if (pod.metadata?.deletionTimestamp) return 'Terminated';
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') return 'Terminated';
  const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  return phase === 'Running' && ready ? 'Running' : 'Provisioning';
}

export function toInstance(pod: V1Pod): Instance {
  const created = pod.metadata?.creationTimestamp;
  return {
    id: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
    ip: pod.status?.podIP ?? '',
    state: podState(pod),
    ...ownershipFromLabels(pod.metadata?.labels),
    createdAt: created ? new Date(created) : new Date(0),
  };
}

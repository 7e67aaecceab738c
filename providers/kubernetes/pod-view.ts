import type { V1Pod } from '@kubernetes/client-node';
import { ownershipFromLabels, type Instance, type InstanceState } from '../contract.js';
import { KUBERNETES_DEFAULTS } from './config.js';

/** Why a Pod is not starting, in the kubelet's (or the scheduler's) words. */
export interface PodProblem {
  /** The kubelet's or scheduler's reason: ErrImagePull, ImagePullBackOff, CrashLoopBackOff, Unschedulable, ... */
  reason: string;
  message: string;
}

/** Waiting reasons that are steps of a normal start, not problems. */
const STARTING_REASONS: ReadonlySet<string> = new Set(['ContainerCreating', 'PodInitializing']);

/**
 * The first thing keeping the Pod from running: an unschedulable Pod, else a container waiting
 * for a reason other than a normal start (image pull failures, crash loops, config errors).
 * A crash loop also names the last exit, which is where Squid's own error shows.
 */
export function podProblem(pod: V1Pod): PodProblem | undefined {
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
  if (scheduled?.status === 'False' && scheduled.reason)
    return { reason: scheduled.reason, message: scheduled.message ?? '' };
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    const waiting = s.state?.waiting;
    if (!waiting?.reason || STARTING_REASONS.has(waiting.reason)) continue;
    const last = s.lastState?.terminated;
    const exit = last
      ? `; last exit code ${last.exitCode}${last.reason ? ` (${last.reason})` : ''}${last.message ? `: ${last.message.trim()}` : ''}`
      : '';
    return { reason: waiting.reason, message: `${waiting.message ?? ''}${exit}`.replace(/^; /, '') };
  }
  return undefined;
}

/** The Pod's age in seconds at `now` (0 without a creation time). */
function ageSeconds(pod: V1Pod, now: Date): number {
  const created = pod.metadata?.creationTimestamp;
  return created ? (now.getTime() - new Date(created).getTime()) / 1000 : 0;
}

/** What the provider needs to judge a Pod: the clock and how long a start may take. */
export interface PodViewOptions {
  now: Date;
  startTimeoutSeconds?: number;
}

/**
 * Pod → contract state and, when it is not simply starting or running, why. Running means
 * Ready (Squid accepts); a finished or deleted Pod is Terminated; and a Pod still Pending
 * (no container ever started) past the start bound is Terminated too, like a cloud instance
 * that never boots, so the operator replaces it.
 */
export function podState(pod: V1Pod, opts: PodViewOptions): { state: InstanceState; detail?: string } {
  if (pod.metadata?.deletionTimestamp) return { state: 'Terminated', detail: 'the Pod is being deleted' };
  const phase = pod.status?.phase;
  const problem = podProblem(pod);
  const said = problem ? `${problem.reason}: ${problem.message}` : undefined;
  if (phase === 'Failed' || phase === 'Succeeded')
    return {
      state: 'Terminated',
      detail: `the Pod ${phase.toLowerCase()}${pod.status?.message ? `: ${pod.status.message}` : ''}`,
    };
  const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
  if (phase === 'Running' && ready) return { state: 'Running' };
  const bound = opts.startTimeoutSeconds ?? KUBERNETES_DEFAULTS.startTimeoutSeconds;
  if ((phase === undefined || phase === 'Pending') && ageSeconds(pod, opts.now) > bound) {
    return {
      state: 'Terminated',
      detail: `not started within ${bound} s of its creation${said ? ` (${said})` : ''}`,
    };
  }
  return { state: 'Provisioning', ...(said ? { detail: said } : {}) };
}

export function toInstance(pod: V1Pod, opts: PodViewOptions): Instance {
  const created = pod.metadata?.creationTimestamp;
  const { state, detail } = podState(pod, opts);
  return {
    id: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
    ip: pod.status?.podIP ?? '',
    state,
    ...(detail ? { detail } : {}),
    ...ownershipFromLabels(pod.metadata?.labels),
    createdAt: created ? new Date(created) : new Date(0),
  };
}

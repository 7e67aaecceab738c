// Status building blocks every step uses: the Healthy condition and phase a verdict implies,
// the status of an instance serving, starting or being replaced, and finish (the Ready and
// Unhealthy Events and the phase-change log every status change implies).
import {
  type Condition,
  CONDITION_HEALTHY,
  type ConditionType,
  HEALTHY_REASONS,
  type HealthyReason,
  type ProvisionedReason,
  type Proxy,
  type ProxyPhase,
  type ReplacementCause,
  type ReplacementStatus,
} from '../../crds/proxy-types.js';
import { DEFAULT_LATENCY_POLICY, latencyChangedEnough } from '../../health/index.js';
import type { Instance } from '../../providers/contract.js';
import type { ConditionIntent, HealthVerdict, Inputs, StatusIntent, Step } from './types.js';

/** A proxy that served (Ready or Unhealthy) or is already between instances: its replacement holds a slot. */
export function served(proxy: Proxy): boolean {
  const phase = proxy.status?.phase;
  return phase === 'Ready' || phase === 'Unhealthy' || proxy.status?.replacement !== undefined;
}

/** The replacement record to write when a proxy goes out of service: an existing one is kept. */
export function replacementRecord(
  proxy: Proxy,
  cause: ReplacementCause,
  now: Date | undefined,
): ReplacementStatus | undefined {
  if (proxy.status?.replacement) return undefined;
  if (!served(proxy)) return undefined;
  return { cause, startedAt: (now ?? new Date()).toISOString() };
}

export const AWAITING_PROBE: ConditionIntent<HealthyReason> = {
  status: 'Unknown',
  reason: 'AwaitingProbe',
  message: 'no health verdict yet',
};

export function findCondition(proxy: Proxy, type: ConditionType): Condition | undefined {
  return proxy.status?.conditions?.find((c) => c.type === type);
}

export function isHealthyReason(reason: string): reason is HealthyReason {
  return (HEALTHY_REASONS as readonly string[]).includes(reason);
}

/** The verdict status holds, if it holds one (True/False with a reason the engine gives). */
export function storedVerdict(proxy: Proxy): ConditionIntent<HealthyReason> | undefined {
  const c = findCondition(proxy, CONDITION_HEALTHY);
  if (!c || c.status === 'Unknown' || !isHealthyReason(c.reason) || c.reason === 'AwaitingProbe')
    return undefined;
  return { status: c.status, reason: c.reason, message: c.message };
}

export interface Health {
  condition: ConditionIntent<HealthyReason>;
  /** Undefined while there is no verdict to go by. */
  phase: 'Ready' | 'Unhealthy' | undefined;
  extra: Pick<StatusIntent, 'latencyMillis' | 'lastHealthCheckTime'>;
}

/**
 * The Healthy condition and the phase it implies. `sameAddress` says the stored verdict was
 * taken at the address the proxy has now. Then, with no verdict in memory (a restart, a new
 * leader), the stored verdict is carried forward until the engine's own arrive; and a verdict
 * that agrees with the stored one (same status and reason; latency within the engine's band,
 * or any latency for the first verdict, which rests on one probe) keeps the stored values, so a
 * new engine confirming a steady fleet writes nothing.
 */
export function healthOf(proxy: Proxy, verdict: HealthVerdict | undefined, sameAddress: boolean): Health {
  const stored = sameAddress ? storedVerdict(proxy) : undefined;
  if (verdict) {
    const status = verdict.healthy ? 'True' : 'False';
    const phase = verdict.healthy ? 'Ready' : 'Unhealthy';
    const storedLatency = proxy.status?.latencyMillis;
    const agrees =
      stored !== undefined &&
      stored.status === status &&
      stored.reason === verdict.reason &&
      (!verdict.healthy ||
        verdict.first === true ||
        (storedLatency !== undefined &&
          !latencyChangedEnough(storedLatency, verdict.latencyMillis, DEFAULT_LATENCY_POLICY)));
    if (agrees) return { condition: stored, phase, extra: {} };
    return {
      condition: { status, reason: verdict.reason, message: verdict.message },
      phase,
      extra: { latencyMillis: verdict.latencyMillis, lastHealthCheckTime: verdict.checkedAt.toISOString() },
    };
  }
  if (stored)
    return { condition: stored, phase: stored.status === 'True' ? 'Ready' : 'Unhealthy', extra: {} };
  return { condition: AWAITING_PROBE, phase: undefined, extra: {} };
}

/** The status of a proxy with no instance: creating one, or unable to yet. */
export function noInstanceStatus(
  phase: 'Pending' | 'Provisioning',
  provisioned: ConditionIntent<ProvisionedReason>,
  replacement?: ReplacementStatus,
): StatusIntent {
  return {
    phase,
    providerID: null,
    ip: null,
    provisioned,
    healthy: AWAITING_PROBE,
    ...(replacement ? { replacement } : {}),
  };
}

/** The status of an instance that is not serving (starting, or deleted to be replaced): no verdict counts. */
export function instanceStatus(
  instance: Instance,
  provisioned: ConditionIntent<ProvisionedReason>,
): StatusIntent {
  return {
    phase: 'Provisioning',
    providerID: instance.id,
    ip: instance.ip || null,
    provisioned,
    healthy: AWAITING_PROBE,
  };
}

/**
 * The status of a proxy on its instance whose phase follows health; `fallback` is the phase
 * while there is no verdict to go by.
 */
export function servingStatus(
  instance: Instance,
  h: Health,
  provisioned: ConditionIntent<ProvisionedReason>,
  fallback: ProxyPhase,
): StatusIntent {
  return {
    phase: h.phase ?? fallback,
    providerID: instance.id,
    ip: instance.ip || null,
    provisioned,
    healthy: h.condition,
    ...h.extra,
  };
}

/** The status while `instance` is deleted to be replaced, saying why. */
export function replacingStatus(
  instance: Instance,
  why: string,
  replacement?: ReplacementStatus,
): StatusIntent {
  return {
    ...instanceStatus(instance, {
      status: 'False',
      reason: 'Replacing',
      message: `${why}: deleting instance ${instance.id} and creating a new one; the proxy's IP will change`,
    }),
    ...(replacement ? { replacement } : {}),
  };
}

/** The Event message of a replacement: the IP change shouted, since crawlers may pin it. */
export function replacingMessage(instance: Instance, why: string): string {
  return `${why}: replacing instance ${instance.id} — the proxy's IP WILL CHANGE`;
}

/**
 * Adds what every status change implies: the Ready/Unhealthy Events and the phase-change log.
 * Health transitions are Events so `kubectl describe px` tells the story.
 */
export function finish(
  proxy: Proxy,
  step: Omit<Step, 'events' | 'logs'> & Partial<Pick<Step, 'events' | 'logs'>>,
): Step {
  const events = [...(step.events ?? [])];
  const logs = [...(step.logs ?? [])];
  const previous = proxy.status?.phase;
  const status = step.status;
  if (status && status.phase !== previous) {
    logs.push({
      level: 'info',
      message: 'phase changed',
      fields: { from: previous ?? 'none', phase: status.phase, reason: status.provisioned?.reason },
    });
    const health = status.healthy ?? storedVerdict(proxy);
    if (status.phase === 'Ready')
      events.push({ type: 'Normal', reason: 'Ready', message: `proxy is healthy: ${health?.message ?? ''}` });
    if (status.phase === 'Unhealthy') events.push(unhealthyEvent(health));
  }
  return { ...step, events, logs };
}

/** The Event of a move to Unhealthy: a probe target that cannot or may not be probed says so. */
function unhealthyEvent(health: ConditionIntent<HealthyReason> | undefined): Step['events'][number] {
  const message = health?.message ?? '';
  if (health?.reason === 'InvalidProbeTarget')
    return { type: 'Warning', reason: 'InvalidProbeTarget', message: `proxy cannot be probed: ${message}` };
  if (health?.reason === 'EndpointRefused')
    return {
      type: 'Warning',
      reason: 'EndpointRefused',
      message: `proxy is never probed nor leased: ${message}`,
    };
  return {
    type: 'Warning',
    reason: 'Unhealthy',
    message: `proxy is unhealthy (${health?.reason ?? 'unknown'}): ${message}`,
  };
}

/** Why the desired revision is unknown: the credentials, else cloud-init. */
export function unresolved(inp: Inputs): ConditionIntent<ProvisionedReason> {
  if (inp.credentialsError !== undefined)
    return { status: 'False', reason: 'CredentialsError', message: inp.credentialsError };
  return {
    status: 'False',
    reason: 'CloudInitError',
    message: inp.cloudInitError ?? 'cloud-init unresolved',
  };
}

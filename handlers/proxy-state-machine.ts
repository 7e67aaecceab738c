import type { Instance } from '../providers/contract.js';
import type { Proxy, ProxyPhase } from '../crds/proxy-types.js';
import { SPEC_HASH_ANNOTATION } from '../crds/proxy-types.js';

/** What the reconciler learnt about the world this run; nothing is remembered between runs. */
export type Observation =
  | { kind: 'unprovisioned' } // status.providerID is empty
  | { kind: 'found'; instance: Instance }
  | { kind: 'not-found' };

/** The last status-affecting probe verdict, if the health engine has one. */
export interface HealthVerdict {
  healthy: boolean;
  latencyMillis: number;
  reason: string;
  message: string;
  checkedAt: Date;
}

export interface ConditionIntent {
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export interface StatusIntent {
  phase: ProxyPhase;
  /** null clears the field. */
  providerID: string | null;
  ip: string | null;
  provisioned: ConditionIntent;
  healthy: ConditionIntent;
  latencyMillis?: number;
  lastHealthCheckTime?: string;
}

export type Action =
  | { type: 'none' }
  | { type: 'create' } // provider.create, then record the providerID
  | { type: 'delete'; providerID: string } // replacement or terminated instance: delete, then wait for NotFound
  | { type: 'forget' }; // the instance is gone: clear providerID and ip so the next run creates anew

export interface EventIntent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface Step {
  action: Action;
  status: StatusIntent;
  event?: EventIntent;
  /** Write this spec hash to the annotation before acting. */
  annotateHash?: string;
  /** Seconds until the next look; undefined when steady. */
  requeueAfter?: number;
}

export interface Inputs {
  proxy: Proxy;
  /** Undefined when cloud-init could not be resolved. */
  desiredHash: string | undefined;
  cloudInitError?: string;
  observation: Observation;
  verdict?: HealthVerdict;
}

/** How often a provisioning instance is polled. */
export const POLL_SECONDS = 5;

const AWAITING_PROBE: ConditionIntent = {
  status: 'Unknown',
  reason: 'AwaitingProbe',
  message: 'no health verdict yet',
};

function healthOf(verdict: HealthVerdict | undefined): {
  condition: ConditionIntent;
  phase: ProxyPhase | undefined;
  extra: Pick<StatusIntent, 'latencyMillis' | 'lastHealthCheckTime'>;
} {
  if (!verdict) return { condition: AWAITING_PROBE, phase: undefined, extra: {} };
  return {
    condition: {
      status: verdict.healthy ? 'True' : 'False',
      reason: verdict.reason,
      message: verdict.message,
    },
    phase: verdict.healthy ? 'Ready' : 'Unhealthy',
    extra: { latencyMillis: verdict.latencyMillis, lastHealthCheckTime: verdict.checkedAt.toISOString() },
  };
}

/** External proxies: nothing to provision; the phase follows health. */
export function externalStep(proxy: Proxy, verdict: HealthVerdict | undefined): Step {
  const h = healthOf(verdict);
  return {
    action: { type: 'none' },
    status: {
      phase: h.phase ?? 'Pending',
      providerID: null,
      ip: proxy.spec.endpoint?.host ?? null,
      provisioned: {
        status: 'True',
        reason: 'External',
        message: 'tracked only: provisioned outside the operator',
      },
      healthy: h.condition,
      ...h.extra,
    },
  };
}

/**
 * The Managed reconciler's state machine: one action derived from (spec, status, provider
 * get). Every input is re-read on every run, so a crash between any two writes is safe.
 */
export function managedStep(inp: Inputs): Step {
  const { proxy, observation } = inp;
  const current = proxy.status ?? {};
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  const h = healthOf(inp.verdict);

  if (observation.kind === 'unprovisioned') {
    if (inp.desiredHash === undefined) {
      return {
        action: { type: 'none' },
        status: {
          phase: 'Pending',
          providerID: null,
          ip: null,
          provisioned: {
            status: 'False',
            reason: 'CloudInitError',
            message: inp.cloudInitError ?? 'cloud-init unresolved',
          },
          healthy: AWAITING_PROBE,
        },
        requeueAfter: 60,
      };
    }
    return {
      action: { type: 'create' },
      annotateHash: recorded === inp.desiredHash ? undefined : inp.desiredHash,
      status: {
        phase: 'Provisioning',
        providerID: null,
        ip: null,
        provisioned: { status: 'False', reason: 'Creating', message: 'instance creation submitted' },
        healthy: AWAITING_PROBE,
      },
      event: {
        type: 'Normal',
        reason: 'Creating',
        message: `creating instance with provider ${proxy.spec.provider}`,
      },
      requeueAfter: POLL_SECONDS,
    };
  }

  const providerID = current.providerID ?? '';
  if (observation.kind === 'not-found') {
    const replacing = recorded !== inp.desiredHash;
    return {
      action: { type: 'forget' },
      status: {
        phase: 'Provisioning',
        providerID: null,
        ip: null,
        provisioned: replacing
          ? {
              status: 'False',
              reason: 'Replacing',
              message: `old instance ${providerID} deleted; creating its replacement`,
            }
          : {
              status: 'False',
              reason: 'InstanceGone',
              message: `instance ${providerID} no longer exists; re-creating it`,
            },
        healthy: AWAITING_PROBE,
      },
      event: replacing
        ? undefined
        : {
            type: 'Warning',
            reason: 'InstanceGone',
            message: `instance ${providerID} disappeared at the provider; creating a new one — the proxy's IP will change`,
          },
      requeueAfter: 1,
    };
  }

  const instance = observation.instance;
  const cloudInitProblem: ConditionIntent | undefined =
    inp.desiredHash === undefined
      ? { status: 'False', reason: 'CloudInitError', message: inp.cloudInitError ?? 'cloud-init unresolved' }
      : undefined;

  const drifted = inp.desiredHash !== undefined && recorded !== inp.desiredHash;
  const dead = instance.state === 'Stopped' || instance.state === 'Terminated';
  if (drifted || dead) {
    const already = current.conditions?.some((c) => c.type === 'Provisioned' && c.reason === 'Replacing');
    const why = drifted
      ? 'spec changed (placement, cloud-init or port)'
      : `instance is ${instance.state.toLowerCase()}`;
    return {
      action: { type: 'delete', providerID: instance.id },
      status: {
        phase: 'Provisioning',
        providerID: instance.id,
        ip: instance.ip || null,
        provisioned: {
          status: 'False',
          reason: 'Replacing',
          message: `${why}: deleting instance ${instance.id} and creating a new one; the proxy's IP will change`,
        },
        healthy: AWAITING_PROBE,
      },
      event: already
        ? undefined
        : {
            type: 'Warning',
            reason: 'Replacing',
            message: `${why}: replacing instance ${instance.id} — the proxy's IP WILL CHANGE`,
          },
      requeueAfter: POLL_SECONDS,
    };
  }

  if (instance.state === 'Provisioning' || !instance.ip) {
    return {
      action: { type: 'none' },
      status: {
        phase: 'Provisioning',
        providerID: instance.id,
        ip: instance.ip || null,
        provisioned: cloudInitProblem ?? {
          status: 'False',
          reason: 'InstanceProvisioning',
          message: `instance ${instance.id} is starting`,
        },
        healthy: AWAITING_PROBE,
      },
      requeueAfter: POLL_SECONDS,
    };
  }

  // Running with an address. Until the first probe verdict a running proxy is not Ready.
  const wasRunning = current.conditions?.some(
    (c) => c.type === 'Provisioned' && c.reason === 'InstanceRunning',
  );
  return {
    action: { type: 'none' },
    status: {
      phase: h.phase ?? 'Provisioning',
      providerID: instance.id,
      ip: instance.ip,
      provisioned: cloudInitProblem ?? {
        status: 'True',
        reason: 'InstanceRunning',
        message: `instance ${instance.id} is running at ${instance.ip}`,
      },
      healthy: h.condition,
      ...h.extra,
    },
    event: wasRunning
      ? undefined
      : {
          type: 'Normal',
          reason: 'Provisioned',
          message: `instance ${instance.id} is running at ${instance.ip}`,
        },
  };
}

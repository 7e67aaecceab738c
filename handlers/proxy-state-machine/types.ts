// The state machine's vocabulary: what it is given (Inputs, Observation, the verdict, the
// autopilot's policy, the budget's ask) and what it decides (Step: an action, a status, Events,
// logs, what next), with the poll intervals.
import type {
  HealthyReason,
  ProvisionedReason,
  Proxy,
  ProxyPhase,
  ReplacementCause,
  ReplacementStatus,
} from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import type { RepairHold, RepairHoldReason } from '../repair-hold.js';
import type { SlotAnswer, SlotKind } from '../replacement-budget.js';

/** What the reconciler learnt about the world this run; nothing is remembered between runs. */
export type Observation =
  /**
   * status.providerID is empty. `strays` are the provider's instances of this Proxy's UID,
   * listed only when a create may have happened that was never recorded (see needsInventory).
   */
  | { kind: 'unprovisioned'; strays?: readonly Instance[] }
  | { kind: 'found'; instance: Instance }
  | { kind: 'not-found' };

/** The last status-affecting probe verdict, if the health engine has one. */
export interface HealthVerdict {
  healthy: boolean;
  latencyMillis: number;
  reason: HealthyReason;
  message: string;
  checkedAt: Date;
  /**
   * The first verdict at this address in this process (a restart, a leader change). It rests
   * on one probe, where the engine needs two to report a latency change: if it agrees with the
   * stored verdict, the stored values stand, latency included.
   */
  first?: boolean;
}

export interface ConditionIntent<R extends string> {
  status: 'True' | 'False' | 'Unknown';
  reason: R;
  message: string;
}

/** The status to write. An undefined field is left as stored; null clears it. */
export interface StatusIntent {
  phase: ProxyPhase;
  providerID?: string | null;
  ip?: string | null;
  provisioned?: ConditionIntent<ProvisionedReason>;
  healthy?: ConditionIntent<HealthyReason>;
  latencyMillis?: number;
  lastHealthCheckTime?: string;
  replacement?: ReplacementStatus | null;
}

export type Action =
  | { type: 'none' }
  /** Delete `staleInstances` (revisions an interrupted create left behind), then create and record the ID. */
  | { type: 'create'; staleInstances: readonly string[] }
  /** Delete these instances (replacement, a dead instance, or deletion), then wait for NotFound. */
  | { type: 'delete'; providerIDs: readonly string[] }
  /** The instance is gone: clear providerID and ip so the next run creates anew. */
  | { type: 'forget' }
  /** Deletion is complete: the finalizer may go. */
  | { type: 'release' };

/** Reasons of the Events the reconciler posts. */
export type ProxyEventReason =
  | 'Creating'
  | 'Provisioned'
  | 'Replacing'
  | 'ReplacingUnhealthy'
  | 'Rotating'
  | 'ReplacementPending'
  | 'ReplacementBlocked'
  | 'ReplacementFailed'
  /** An Unhealthy proxy's repair holds: the cause looks shared (repair-hold.ts). */
  | 'RepairHeld'
  | 'UnhealthyExternal'
  /** An External proxy cools down on spec.rotation.whenCoolingDownOn targets: its owner must act. */
  | 'RotationDue'
  | 'StaleInstances'
  | 'InstanceGone'
  | 'InstanceNotStarting'
  | 'Ready'
  | 'Unhealthy'
  | 'InvalidProbeTarget'
  /** An External endpoint in a range the providers config does not allow (never probed). */
  | 'EndpointRefused'
  | 'QuotaExceeded'
  | 'ProviderError'
  | 'ProvisioningFailed'
  | 'UnknownProvider'
  | 'Deleting';

export interface EventIntent {
  type: 'Normal' | 'Warning';
  reason: ProxyEventReason;
  message: string;
}

export interface LogIntent {
  level: 'info' | 'warn' | 'error';
  message: string;
  fields?: Record<string, unknown>;
}

/** What happens after the step: nothing, another look later, the framework's backoff, or stop. */
export type Next =
  | { kind: 'steady' }
  | { kind: 'requeue'; seconds: number }
  | { kind: 'backoff' }
  | { kind: 'permanent'; message: string };

export interface Step {
  action: Action;
  /** Undefined: write nothing. */
  status?: StatusIntent;
  /** Posted only when the status write changed something, so a retry never repeats them. */
  events: EventIntent[];
  logs: LogIntent[];
  /** Write this spec hash to the annotation before acting: the record of what is about to exist. */
  annotateHash?: string;
  /** The --max-unavailable slot this replacement holds (the budget granted it: Inputs.slot). */
  needsSlot?: SlotKind;
  /** This step takes a proxy that served out of service for a new instance (the metric counts it). */
  startsReplacement?: ReplacementCause;
  /** This proxy's repair is held now, and why (the metric counts it). */
  repairHeld?: RepairHoldReason;
  next: Next;
}

/** The budget's answer to one replacement's ask. */
export type SlotGrant = Pick<SlotAnswer, 'granted' | 'cap' | 'failed'>;

/**
 * Asks the replacement budget for a --max-unavailable slot of this kind (a grant is held by
 * the proxy until its status no longer holds it). A function, required: a decision can never
 * go ahead unpaced because nobody asked.
 */
export type SlotAsk = (kind: SlotKind) => SlotGrant;

export interface Inputs {
  proxy: Proxy;
  /** Undefined when cloud-init could not be resolved. */
  desiredHash: string | undefined;
  cloudInitError?: string;
  /** Why the credentials cannot be resolved (this too leaves desiredHash undefined). */
  credentialsError?: string;
  /**
   * The instance was created with other credentials than the Secret holds now (see
   * credentialsRotated): its replacement always takes a --max-unavailable slot.
   */
  credentialsRotated?: boolean;
  observation: Observation;
  verdict?: HealthVerdict;
  /** The autopilot's inputs; absent = no automatic replacement (unit tests of other paths). */
  autopilot?: Autopilot;
  /**
   * The replacement budget, asked only for the slot a replacement needs (slotFor). Refused:
   * the replacement waits and the proxy keeps its instance.
   */
  slot: SlotAsk;
  /**
   * Whether an Unhealthy proxy's repair may go ahead (repair-hold.ts): asked only when a repair
   * is due, or when its spec changed (a held proxy's rollout is paced: slotFor). Absent: no
   * hold (the shell always passes it).
   */
  repairHold?: () => RepairHold;
  /**
   * Whether an instance the provider reports dead may be deleted now (dead-instance-hold.ts:
   * too many serving proxies reported dead at once hold). The shell asks it only then (it
   * lists the provider's instances); absent: no hold.
   */
  deadHold?: RepairHold;
  /**
   * Seconds between looks at an instance being created or replaced, and at a replacement
   * waiting for a slot (--instance-poll-interval). Absent: POLL_SECONDS.
   */
  pollSeconds?: number;
}

/** What the autopilot's time-based decisions need: the clock and the resolved policy. */
export interface Autopilot {
  now: Date;
  /** spec.rotation.unhealthyAfterSeconds, else the fleet's --replace-unhealthy-after; 0 = off. */
  unhealthyAfterSeconds: number;
  /** spec.rotation.maxAgeSeconds; 0 or absent = no rotation on age. */
  maxAgeSeconds?: number;
  /** `--rotation-drain-timeout`: how long a rotated proxy drains before it is replaced. */
  drainSeconds?: number;
  /** spec.rotation.whenCoolingDownOn is set: a drain it began runs on with maxAgeSeconds off. */
  rotatesOnBans?: boolean;
  /** Why the proxy is due a rotation on bans now (handlers/ban-rotation.ts); absent = not due. */
  bansDue?: string;
}

/** How often a provisioning instance is polled. */
export const POLL_SECONDS = 5;

/** How often a deleting instance is polled. */
export const DELETE_POLL_SECONDS = 2;

/** How often a proxy blocked by a configuration mistake is looked at again. */
export const CONFIG_RETRY_SECONDS = 300;

/** How often a proxy whose cloud-init cannot be resolved is looked at again. */
export const CLOUD_INIT_RETRY_SECONDS = 60;

/** How often a replacement waiting for a slot asks again. */
export const SLOT_POLL_SECONDS = POLL_SECONDS;

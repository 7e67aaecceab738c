import type { Instance } from '../providers/contract.js';
import { QUOTA_RETRY_SECONDS, type ProviderErrorKind, type ProviderOperation } from '../providers/errors.js';
import { DEFAULT_LATENCY_POLICY, latencyChangedEnough } from '../health/index.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  HEALTHY_REASONS,
  SPEC_HASH_ANNOTATION,
  type Condition,
  type ConditionType,
  type HealthyReason,
  type ProvisionedReason,
  type Proxy,
  type ProxyPhase,
  type ReplacementCause,
  type ReplacementStatus,
} from '../crds/proxy-types.js';
import type { SlotAnswer, SlotKind } from './replacement-budget.js';
import type { RepairHold, RepairHoldReason } from './repair-hold.js';

// The pure core of the Proxy reconciler: every status, Event and retry decision, for the
// normal path and every failure path, is made here from (spec, status, what the provider
// said, the last health verdict). The controller only acts on the world and writes.

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
   * is due. Absent: no hold (the shell always passes it).
   */
  repairHold?: () => RepairHold;
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

/** A rotation comes up to this fraction of maxAge early, by instance, so a fleet spreads out. */
export const ROTATION_JITTER = 0.1;
/** The default drain: the discovery API's default lease TTL, so a default lease can finish. */
export const DEFAULT_ROTATION_DRAIN_SECONDS = 300;

/** A stable number in [0, 1) per instance ID (FNV-1a): the same on every run and replica. */
export function rotationJitter(instanceID: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < instanceID.length; i++) {
    h ^= instanceID.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h / 2 ** 32;
}

/** Where a Managed proxy stands against its rotation on age. */
export type RotationClock =
  | { kind: 'off' }
  /** Not old enough yet: look again in `seconds`. */
  | { kind: 'waiting'; seconds: number }
  /** Old enough (or banned: `why`): start draining (needs a --max-unavailable slot). */
  | { kind: 'due'; ageSeconds: number; dueAfterSeconds: number; why?: string }
  /** Draining since `since`; `seconds` of the drain left. */
  | { kind: 'draining'; since: string; seconds: number }
  /** Drained: replace the instance now (its slot is held since the drain began). */
  | { kind: 'drained'; since: string };

/**
 * The rotation decision, from status only (a restart or a new leader keeps every clock): the
 * age runs from the Provisioned condition's turn to True (the instance came up), the drain
 * from status.replacement.startedAt. Turning maxAgeSeconds off mid-drain cancels the drain.
 */
export function rotationClock(
  proxy: Proxy,
  instanceID: string,
  autopilot: Autopilot | undefined,
): RotationClock {
  const maxAge = autopilot?.maxAgeSeconds ?? 0;
  if (!autopilot || (maxAge <= 0 && !autopilot.rotatesOnBans)) return { kind: 'off' };
  const now = autopilot.now.getTime();
  const replacement = proxy.status?.replacement;
  const phase = proxy.status?.phase;
  if (replacement?.cause === 'Rotation') {
    // Once its instance is deleted (Provisioning onwards) the drain is over, yet the record
    // stays until the new instance is Ready (it holds the slot). Without oldInstanceGoneAt a
    // new instance Unhealthy at its first probe would be "drained" and deleted at once, on
    // every try. Not the Provisioned reason: a failed get or delete overwrites Draining.
    if (replacement.oldInstanceGoneAt !== undefined || (phase !== 'Ready' && phase !== 'Unhealthy'))
      return { kind: 'off' };
    const drain = autopilot.drainSeconds ?? DEFAULT_ROTATION_DRAIN_SECONDS;
    const since = Date.parse(replacement.startedAt);
    const elapsed = Number.isNaN(since) ? drain : Math.max(0, (now - since) / 1000);
    if (elapsed >= drain) return { kind: 'drained', since: replacement.startedAt };
    return { kind: 'draining', since: replacement.startedAt, seconds: Math.ceil(drain - elapsed) };
  }
  if (replacement !== undefined) return { kind: 'off' };
  if (autopilot.bansDue) return { kind: 'due', ageSeconds: 0, dueAfterSeconds: 0, why: autopilot.bansDue };
  if (maxAge <= 0) return { kind: 'off' };
  const up = findCondition(proxy, CONDITION_PROVISIONED);
  const born =
    up?.status === 'True' && up.lastTransitionTime ? Date.parse(up.lastTransitionTime) : Number.NaN;
  const dueAfter = maxAge * (1 - ROTATION_JITTER * rotationJitter(instanceID));
  if (Number.isNaN(born)) return { kind: 'waiting', seconds: Math.ceil(dueAfter) };
  const age = Math.max(0, (now - born) / 1000);
  if (age >= dueAfter)
    return { kind: 'due', ageSeconds: Math.floor(age), dueAfterSeconds: Math.ceil(dueAfter) };
  return { kind: 'waiting', seconds: Math.ceil(dueAfter - age) };
}

/** The grace the proxy's own field sets, else the fleet default (the schema cannot know the flag). */
export function unhealthyGrace(proxy: Proxy, fleetDefault: number): number {
  return proxy.spec.rotation?.unhealthyAfterSeconds ?? fleetDefault;
}

/** Where a proxy stands against its Unhealthy grace: not applicable, waiting `seconds` more, or due. */
export type UnhealthyClock =
  { kind: 'off' } | { kind: 'waiting'; seconds: number } | { kind: 'due'; since: string; forSeconds: number };

/**
 * How long the proxy has been Unhealthy, from the stored Healthy condition's transition time:
 * status, not memory, so a restart or a new leader keeps the clock. A verdict that makes it
 * Unhealthy only now starts the clock now.
 */
export function unhealthyClock(
  proxy: Proxy,
  healthy: ConditionIntent<HealthyReason>,
  autopilot: Autopilot | undefined,
): UnhealthyClock {
  const grace = autopilot?.unhealthyAfterSeconds ?? 0;
  // InvalidProbeTarget is a spec mistake a new instance cannot fix.
  if (!autopilot || grace <= 0 || healthy.status !== 'False' || healthy.reason === 'InvalidProbeTarget')
    return { kind: 'off' };
  const stored = findCondition(proxy, CONDITION_HEALTHY);
  const since =
    stored?.status === 'False' && stored.lastTransitionTime
      ? Date.parse(stored.lastTransitionTime)
      : Number.NaN;
  const now = autopilot.now.getTime();
  if (Number.isNaN(since)) return { kind: 'waiting', seconds: grace };
  const elapsed = Math.max(0, (now - since) / 1000);
  if (elapsed >= grace)
    return { kind: 'due', since: new Date(since).toISOString(), forSeconds: Math.floor(elapsed) };
  return { kind: 'waiting', seconds: Math.ceil(grace - elapsed) };
}

/** A proxy that served (Ready or Unhealthy) or is already between instances: its replacement holds a slot. */
function served(proxy: Proxy): boolean {
  const phase = proxy.status?.phase;
  return phase === 'Ready' || phase === 'Unhealthy' || proxy.status?.replacement !== undefined;
}

/** The replacement record to write when a proxy goes out of service: an existing one is kept. */
function replacementRecord(
  proxy: Proxy,
  cause: ReplacementCause,
  now: Date | undefined,
): ReplacementStatus | undefined {
  if (proxy.status?.replacement) return undefined;
  if (!served(proxy)) return undefined;
  return { cause, startedAt: (now ?? new Date()).toISOString() };
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

const AWAITING_PROBE: ConditionIntent<HealthyReason> = {
  status: 'Unknown',
  reason: 'AwaitingProbe',
  message: 'no health verdict yet',
};

export function findCondition(proxy: Proxy, type: ConditionType): Condition | undefined {
  return proxy.status?.conditions?.find((c) => c.type === type);
}

function isHealthyReason(reason: string): reason is HealthyReason {
  return (HEALTHY_REASONS as readonly string[]).includes(reason);
}

/** The verdict status holds, if it holds one (True/False with a reason the engine gives). */
function storedVerdict(proxy: Proxy): ConditionIntent<HealthyReason> | undefined {
  const c = findCondition(proxy, CONDITION_HEALTHY);
  if (!c || c.status === 'Unknown' || !isHealthyReason(c.reason) || c.reason === 'AwaitingProbe')
    return undefined;
  return { status: c.status, reason: c.reason, message: c.message };
}

interface Health {
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
function noInstanceStatus(
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
function instanceStatus(instance: Instance, provisioned: ConditionIntent<ProvisionedReason>): StatusIntent {
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
function servingStatus(
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
function replacingStatus(instance: Instance, why: string, replacement?: ReplacementStatus): StatusIntent {
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
function replacingMessage(instance: Instance, why: string): string {
  return `${why}: replacing instance ${instance.id} — the proxy's IP WILL CHANGE`;
}

/**
 * Adds what every status change implies: the Ready/Unhealthy Events and the phase-change log.
 * Health transitions are Events so `kubectl describe px` tells the story.
 */
function finish(
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
    if (status.phase === 'Unhealthy') {
      const invalid = health?.reason === 'InvalidProbeTarget';
      events.push({
        type: 'Warning',
        reason: invalid ? 'InvalidProbeTarget' : 'Unhealthy',
        message: invalid
          ? `proxy cannot be probed: ${health?.message ?? ''}`
          : `proxy is unhealthy (${health?.reason ?? 'unknown'}): ${health?.message ?? ''}`,
      });
    }
  }
  return { ...step, events, logs };
}

/** External proxies: nothing to provision; the phase follows health. */
export function externalStep(proxy: Proxy, verdict: HealthVerdict | undefined, autopilot?: Autopilot): Step {
  // The endpoint's port is not in status: a spec change since the stored verdict (the
  // endpoint may have moved) does not carry it forward.
  const host = proxy.spec.endpoint?.host ?? null;
  const sameAddress =
    host !== null &&
    proxy.status?.ip === host &&
    proxy.status?.observedGeneration === proxy.metadata.generation;
  const h = healthOf(proxy, verdict, sameAddress);
  // Never replaced: past the grace, its owner is told (once: the message change is the status
  // change that posts the Event).
  const clock = unhealthyClock(proxy, h.condition, autopilot);
  const overdue =
    clock.kind === 'due'
      ? `unhealthy (${h.condition.reason}) since ${clock.since}, longer than ${autopilot?.unhealthyAfterSeconds} s; the operator never replaces an External proxy: its owner must fix or remove it`
      : undefined;
  // Banned widely: only its owner can give it a new IP (the message change posts the Event).
  const banned = autopilot?.bansDue
    ? `${autopilot.bansDue}; the operator cannot rotate an External proxy: its owner must give it a new IP`
    : undefined;
  return finish(proxy, {
    action: { type: 'none' },
    status: {
      phase: h.phase ?? 'Pending',
      providerID: null,
      ip: host,
      provisioned: {
        status: 'True',
        reason: banned ? 'RotationDue' : 'External',
        message: `tracked only: provisioned outside the operator${overdue ? `; ${overdue}` : ''}${banned ? `; ${banned}` : ''}`,
      },
      healthy: h.condition,
      ...h.extra,
    },
    events: [
      ...(overdue ? [{ type: 'Warning', reason: 'UnhealthyExternal', message: overdue } as const] : []),
      ...(banned ? [{ type: 'Warning', reason: 'RotationDue', message: banned } as const] : []),
    ],
    next: clock.kind === 'waiting' ? { kind: 'requeue', seconds: clock.seconds } : { kind: 'steady' },
  });
}

/**
 * Whether a create may have happened that status does not record: no providerID, but the
 * spec-hash annotation (written before every create) names a revision other than the one
 * wanted now. Only then are the provider's instances of this Proxy listed.
 */
export function needsInventory(proxy: Proxy, desiredHash: string | undefined): boolean {
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  return (
    !proxy.status?.providerID &&
    recorded !== undefined &&
    desiredHash !== undefined &&
    recorded !== desiredHash
  );
}

/**
 * Whether the drift timer looks at this proxy: only a steady, running Managed one. Anything
 * else is already on the work queue, and a timer must not retry a Failed proxy or cut a
 * quota back-off short.
 */
export function wantsDriftCheck(proxy: Proxy): boolean {
  return (
    proxy.spec.mode === 'Managed' &&
    !proxy.metadata.deletionTimestamp &&
    findCondition(proxy, CONDITION_PROVISIONED)?.reason === 'InstanceRunning'
  );
}

/** Deleting with no instance recorded: list the ones a create may have made before it was recorded. */
export function deletionNeedsInventory(proxy: Proxy): boolean {
  return !proxy.status?.providerID && proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION] !== undefined;
}

/** Why the desired revision is unknown: the credentials, else cloud-init. */
function unresolved(inp: Inputs): ConditionIntent<ProvisionedReason> {
  if (inp.credentialsError !== undefined)
    return { status: 'False', reason: 'CredentialsError', message: inp.credentialsError };
  return {
    status: 'False',
    reason: 'CloudInitError',
    message: inp.cloudInitError ?? 'cloud-init unresolved',
  };
}

/**
 * The Managed reconciler's state machine: one action derived from (spec, status, provider
 * get, the budget's answer). Every input is re-read on every run, so a crash between any two
 * writes is safe. One step per kind of provider answer.
 */
export function managedStep(inp: Inputs): Step {
  const observation = inp.observation;
  switch (observation.kind) {
    case 'unprovisioned':
      return inp.desiredHash === undefined
        ? unresolvedStep(inp)
        : createStep(inp.proxy, inp.desiredHash, observation.strays ?? []);
    case 'not-found':
      return goneStep(inp);
    case 'found':
      return foundStep(inp, observation.instance);
  }
}

/**
 * What a found instance calls for beyond being kept: the closed list of replacement triggers,
 * checked in this order. A new trigger is one more member: the compiler then asks for its
 * slot (slotFor), its wait message (pendingWhy) and its step (triggeredStep).
 */
export type ReplacementTrigger =
  /** The provider reports the instance stopped or terminated. */
  | { kind: 'InstanceDead' }
  /**
   * The desired revision is not the recorded one (placement, cloud-init, port, credentials);
   * `credentials`: the credentials changed (a rotation).
   */
  | { kind: 'SpecChanged'; credentials?: boolean }
  /** Unhealthy past the grace, once per Ready. */
  | { kind: 'Unhealthy'; reason: HealthyReason; since: string }
  /** Drained after a rotation: replace the instance now. */
  | { kind: 'Drained'; since: string }
  /** Old enough and Ready: start draining (the instance stays until the drain ends). */
  | { kind: 'RotationDue'; why?: string };

/**
 * The --max-unavailable slot a trigger must hold before it acts. Only taking a serving proxy
 * out of service is paced: replacing a dead or not-yet-Ready one takes nothing out, and a
 * drained proxy holds its slot since its drain began. A credentials rotation always takes one,
 * whatever the stored phase: the instance keeps serving with the credentials it was created
 * with until it is replaced, and a phase read while the probes switched would let a bulk
 * rotation (an incident response) take the whole fleet out at once.
 */
export function slotFor(trigger: ReplacementTrigger, phase: ProxyPhase | undefined): SlotKind | undefined {
  switch (trigger.kind) {
    case 'SpecChanged':
      if (phase === 'Ready') return 'rollout';
      // Out of service already: a repair's slot (counting replacements in flight, not the
      // Unhealthy), or rotated proxies that died while waiting would wait on each other forever.
      return trigger.credentials === true ? 'repair' : undefined;
    case 'RotationDue':
      return 'rollout';
    case 'Unhealthy':
      return 'repair';
    case 'InstanceDead':
    case 'Drained':
      return undefined;
  }
}

/** Why a replacement waits for a slot, for its message (undefined: the default by slot kind). */
function pendingWhy(trigger: ReplacementTrigger): string | undefined {
  if (trigger.kind === 'SpecChanged' && trigger.credentials === true)
    return 'credentials rotated (it serves with its old ones meanwhile)';
  if (trigger.kind !== 'RotationDue') return undefined;
  return trigger.why
    ? 'rotation due (spec.rotation.whenCoolingDownOn)'
    : 'rotation due (spec.rotation.maxAgeSeconds)';
}

/**
 * The slot this run's decision needs, if any: the shell asks the replacement budget for it and
 * passes the answer in as Inputs.slot, so the decision is made once, with the budget's answer.
 */
export function slotWanted(inp: Omit<Inputs, 'slot'>): SlotKind | undefined {
  if (inp.observation.kind !== 'found') return undefined;
  const instance = inp.observation.instance;
  const trigger = triggerOf(inp, instance, foundView(inp, instance));
  return trigger && slotFor(trigger, inp.proxy.status?.phase);
}

/** A found instance as the decisions read it: still starting, or running with its health and clocks. */
type FoundView =
  | { kind: 'starting' }
  | { kind: 'running'; h: Health; clock: UnhealthyClock; rotation: RotationClock; repairedBefore: boolean };

function foundView(inp: Omit<Inputs, 'slot'>, instance: Instance): FoundView {
  if (instance.state === 'Provisioning' || !instance.ip) return { kind: 'starting' };
  const { proxy } = inp;
  // Until the first probe verdict at this address it is not Ready.
  const h = healthOf(proxy, inp.verdict, proxy.status?.ip === instance.ip);
  // An unresolved revision stops both clocks: a new instance could not be built.
  const resolved = inp.desiredHash !== undefined;
  return {
    kind: 'running',
    h,
    clock: resolved ? unhealthyClock(proxy, h.condition, inp.autopilot) : { kind: 'off' },
    rotation: resolved ? rotationClock(proxy, instance.id, inp.autopilot) : { kind: 'off' },
    // One repair per Ready: a replacement that is Unhealthy too points at the probe target or
    // the image, which another new instance would not fix (and every try costs an IP and money).
    repairedBefore: proxy.status?.replacement?.cause === 'Unhealthy',
  };
}

function triggerOf(
  inp: Omit<Inputs, 'slot'>,
  instance: Instance,
  view: FoundView,
): ReplacementTrigger | undefined {
  if (instance.state === 'Stopped' || instance.state === 'Terminated') return { kind: 'InstanceDead' };
  const recorded = inp.proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  if (inp.desiredHash !== undefined && recorded !== inp.desiredHash)
    return { kind: 'SpecChanged', ...(inp.credentialsRotated === true ? { credentials: true } : {}) };
  if (view.kind !== 'running') return undefined;
  const { h, clock, rotation } = view;
  if (clock.kind === 'due' && !view.repairedBefore)
    return { kind: 'Unhealthy', reason: h.condition.reason, since: clock.since };
  if (rotation.kind === 'drained') return { kind: 'Drained', since: rotation.since };
  if (rotation.kind === 'due' && h.phase === 'Ready')
    return { kind: 'RotationDue', ...(rotation.why ? { why: rotation.why } : {}) };
  return undefined;
}

function foundStep(inp: Inputs, instance: Instance): Step {
  const view = foundView(inp, instance);
  const trigger = triggerOf(inp, instance, view);
  if (trigger) {
    if (trigger.kind === 'Unhealthy' && view.kind === 'running') {
      const hold = inp.repairHold?.();
      if (hold?.kind === 'hold') return repairHeldStep(inp, instance, view.h, hold);
    }
    const kind = slotFor(trigger, inp.proxy.status?.phase);
    const slot = kind && inp.slot(kind);
    if (kind && slot && !slot.granted)
      return replacementPendingStep(
        { ...inp, observation: { kind: 'found', instance } },
        slot,
        kind,
        pendingWhy(trigger),
      );
    return { ...triggeredStep(inp, instance, trigger), ...(kind ? { needsSlot: kind } : {}) };
  }
  if (view.kind === 'starting') return startingStep(inp, instance);
  if (view.rotation.kind === 'draining')
    return drainingStep(inp, instance, view.h, {
      since: view.rotation.since,
      seconds: view.rotation.seconds,
    });
  return runningStep(inp, instance, view);
}

/**
 * An Unhealthy proxy past its grace whose repair holds (repair-hold.ts): it keeps its instance,
 * says why on the Provisioned condition (one Warning Event as the hold begins: the message is
 * stable while it lasts) and looks again shortly; when the hold lifts, the repair goes ahead.
 */
function repairHeldStep(
  inp: Inputs,
  instance: Instance,
  h: Health,
  hold: Extract<RepairHold, { kind: 'hold' }>,
): Step {
  const { proxy } = inp;
  const message = `${hold.message}; instance ${instance.id} is kept`;
  return finish(proxy, {
    action: { type: 'none' },
    status: servingStatus(instance, h, { status: 'True', reason: 'RepairHeld', message }, 'Unhealthy'),
    events: [{ type: 'Warning', reason: 'RepairHeld', message }],
    logs: [
      { level: 'warn', message: 'repair held', fields: { providerID: instance.id, reason: hold.reason } },
    ],
    repairHeld: hold.reason,
    next: { kind: 'requeue', seconds: SLOT_POLL_SECONDS },
  });
}

/** The step of a trigger that got its slot (or needs none). */
function triggeredStep(inp: Inputs, instance: Instance, trigger: ReplacementTrigger): Step {
  const { proxy } = inp;
  const now = inp.autopilot?.now;
  switch (trigger.kind) {
    case 'InstanceDead':
    case 'SpecChanged': {
      const why =
        trigger.kind === 'InstanceDead'
          ? `instance is ${instance.state.toLowerCase()}${instance.detail ? ` (${instance.detail})` : ''}`
          : trigger.credentials === true
            ? 'credentials rotated'
            : 'spec changed (placement, cloud-init or port)';
      const announced = findCondition(proxy, CONDITION_PROVISIONED)?.reason === 'Replacing';
      return replaceStep(proxy, instance, why, {
        record: replacementRecord(proxy, trigger.kind, now),
        event: announced ? undefined : { type: 'Warning', reason: 'Replacing' },
        log: { level: 'warn', message: `${why}: deleting the instance` },
      });
    }
    case 'Unhealthy': {
      const why = `unhealthy (${trigger.reason}) since ${trigger.since}, longer than spec.rotation.unhealthyAfterSeconds / --replace-unhealthy-after (${inp.autopilot?.unhealthyAfterSeconds} s)`;
      return replaceStep(proxy, instance, why, {
        record: { cause: 'Unhealthy', startedAt: (now ?? new Date()).toISOString() },
        event: { type: 'Warning', reason: 'ReplacingUnhealthy' },
        log: { level: 'warn', message: 'replacing an unhealthy instance' },
      });
    }
    case 'Drained':
      return replaceStep(proxy, instance, `rotation (spec.rotation): drained since ${trigger.since}`, {
        event: { type: 'Normal', reason: 'Replacing' },
        log: { level: 'info', message: 'replacing a drained instance' },
      });
    case 'RotationDue': {
      const h = healthOf(proxy, inp.verdict, proxy.status?.ip === instance.ip);
      return drainingStep(inp, instance, h, 'starting', trigger.why);
    }
  }
}

/**
 * Deleting `instance` to replace it. `record` starts the replacement (and counts it in the
 * metric); no `event` means the replacement was announced already.
 */
function replaceStep(
  proxy: Proxy,
  instance: Instance,
  why: string,
  how: {
    record?: ReplacementStatus;
    event?: Pick<EventIntent, 'type' | 'reason'>;
    log: Pick<LogIntent, 'level' | 'message'>;
  },
): Step {
  return finish(proxy, {
    action: { type: 'delete', providerIDs: [instance.id] },
    startsReplacement: how.record?.cause,
    status: replacingStatus(instance, why, how.record),
    events: how.event ? [{ ...how.event, message: replacingMessage(instance, why) }] : [],
    logs: [{ ...how.log, fields: { providerID: instance.id } }],
    next: { kind: 'requeue', seconds: POLL_SECONDS },
  });
}

/** No instance and the desired revision unknown: nothing can be created yet. */
function unresolvedStep(inp: Inputs): Step {
  return finish(inp.proxy, {
    action: { type: 'none' },
    status: noInstanceStatus('Pending', unresolved(inp)),
    next: { kind: 'requeue', seconds: CLOUD_INIT_RETRY_SECONDS },
  });
}

/** No instance: create one, first deleting what an interrupted create of an earlier revision left. */
function createStep(proxy: Proxy, desiredHash: string, strays: readonly Instance[]): Step {
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  const stale = strays.filter((i) => i.revision !== desiredHash).map((i) => i.id);
  const events: EventIntent[] = stale.length
    ? [
        {
          type: 'Warning',
          reason: 'StaleInstances',
          message: `deleted ${stale.join(', ')}: built for an earlier spec by a create that was interrupted before it was recorded`,
        },
      ]
    : [];
  events.push({
    type: 'Normal',
    reason: 'Creating',
    message: `creating instance with provider ${proxy.spec.provider}`,
  });
  return finish(proxy, {
    action: { type: 'create', staleInstances: stale },
    annotateHash: recorded === desiredHash ? undefined : desiredHash,
    status: noInstanceStatus('Provisioning', {
      status: 'False',
      reason: 'Creating',
      message: 'instance creation submitted',
    }),
    events,
    logs: stale.length
      ? [{ level: 'warn', message: 'deleting instances of earlier revisions', fields: { stale } }]
      : [],
    next: { kind: 'requeue', seconds: POLL_SECONDS },
  });
}

/** The recorded instance is gone: forget it, so the next run creates anew. */
function goneStep(inp: Inputs): Step {
  const { proxy } = inp;
  const providerID = proxy.status?.providerID ?? '';
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  const replacing = inp.desiredHash !== undefined && recorded !== inp.desiredHash;
  const record = replacementRecord(proxy, replacing ? 'SpecChanged' : 'InstanceGone', inp.autopilot?.now);
  // The old instance is gone: what comes next is its replacement (the one way to a new
  // instance is this forget, so every replacement's record says so before it exists).
  const stored = proxy.status?.replacement;
  const goneAt = (inp.autopilot?.now ?? new Date()).toISOString();
  const marked =
    stored === undefined
      ? record && { ...record, oldInstanceGoneAt: goneAt }
      : stored.oldInstanceGoneAt === undefined
        ? { ...stored, oldInstanceGoneAt: goneAt }
        : undefined;
  // Our own delete (a replacement already announced) is no disappearance to warn about.
  const deliberate = replacing || findCondition(proxy, CONDITION_PROVISIONED)?.reason === 'Replacing';
  return finish(proxy, {
    action: { type: 'forget' },
    startsReplacement: record?.cause,
    // Record the revision about to be created before the providerID is cleared.
    annotateHash: replacing ? inp.desiredHash : undefined,
    status: noInstanceStatus(
      'Provisioning',
      deliberate
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
      marked,
    ),
    events: deliberate
      ? []
      : [
          {
            type: 'Warning',
            reason: 'InstanceGone',
            message: `instance ${providerID} disappeared at the provider; creating a new one — the proxy's IP will change`,
          },
        ],
    logs: [{ level: 'info', message: 'instance gone; forgetting it', fields: { providerID } }],
    next: { kind: 'requeue', seconds: 1 },
  });
}

/**
 * The instance exists but has no address yet. The provider's reason it is not starting (a
 * Pod's ImagePullBackOff, a crash loop, an unschedulable Pod) is shown, not hidden behind
 * "starting"; the Event marks the transition.
 */
function startingStep(inp: Inputs, instance: Instance): Step {
  const { proxy } = inp;
  const notStarting = instance.detail
    ? `instance ${instance.id} is not starting: ${instance.detail}`
    : undefined;
  const announce =
    notStarting !== undefined &&
    findCondition(proxy, CONDITION_PROVISIONED)?.reason !== 'InstanceNotStarting';
  return finish(proxy, {
    action: { type: 'none' },
    status: instanceStatus(
      instance,
      inp.desiredHash === undefined
        ? unresolved(inp)
        : notStarting
          ? { status: 'False', reason: 'InstanceNotStarting', message: notStarting }
          : {
              status: 'False',
              reason: 'InstanceProvisioning',
              message: `instance ${instance.id} is starting`,
            },
    ),
    events: announce ? [{ type: 'Warning', reason: 'InstanceNotStarting', message: notStarting }] : [],
    logs: announce
      ? [
          {
            level: 'warn',
            message: 'instance is not starting',
            fields: { providerID: instance.id, detail: instance.detail },
          },
        ]
      : [],
    next: { kind: 'requeue', seconds: POLL_SECONDS },
  });
}

/**
 * A rotated proxy drains out of leases on its instance. `starting`: the drain begins now (its
 * slot is granted: the record, the Event and the metric start); else it goes on, writing
 * nothing new, and looks again when it ends.
 */
function drainingStep(
  inp: Inputs,
  instance: Instance,
  h: Health,
  drain: 'starting' | { since: string; seconds: number },
  /** Why a starting drain is due when it is not age (a rotation on bans). */
  dueWhy?: string,
): Step {
  const starting = drain === 'starting';
  const since = starting ? (inp.autopilot?.now ?? new Date()).toISOString() : drain.since;
  const drainSeconds = inp.autopilot?.drainSeconds ?? DEFAULT_ROTATION_DRAIN_SECONDS;
  const draining = findCondition(inp.proxy, CONDITION_PROVISIONED);
  // The drain keeps the message it began with (its cause is not in status).
  const message =
    !starting && draining?.reason === 'Draining'
      ? draining.message
      : drainMessage(instance.id, since, drainSeconds, dueWhy);
  return finish(inp.proxy, {
    action: { type: 'none' },
    ...(starting ? { startsReplacement: 'Rotation' as const } : {}),
    status: {
      ...servingStatus(instance, h, { status: 'True', reason: 'Draining', message }, 'Ready'),
      ...(starting ? { replacement: { cause: 'Rotation' as const, startedAt: since } } : {}),
    },
    events: starting ? [{ type: 'Normal', reason: 'Rotating', message }] : [],
    logs: starting
      ? [{ level: 'info', message: 'draining an old instance', fields: { providerID: instance.id } }]
      : [],
    next: { kind: 'requeue', seconds: starting ? drainSeconds : drain.seconds },
  });
}

/**
 * The message of a whole drain, from its start: one message, so a drain writes its status
 * once (a write per run would be noise). It names when the instance is replaced.
 */
export function drainMessage(
  instanceID: string,
  since: string,
  drainSeconds: number,
  dueWhy?: string,
): string {
  const replacedAt = new Date(Date.parse(since) + drainSeconds * 1000).toISOString();
  const due = dueWhy ?? 'rotation due (spec.rotation.maxAgeSeconds, with jitter)';
  return `${due}: draining since ${since}, no new leases; instance ${instanceID} is replaced at ${replacedAt} (--rotation-drain-timeout ${drainSeconds} s)`;
}

/** Running with an address and nothing to replace: the phase follows health. */
function runningStep(inp: Inputs, instance: Instance, view: FoundView & { kind: 'running' }): Step {
  const { proxy } = inp;
  const { h, clock, rotation } = view;
  const running = `instance ${instance.id} is running at ${instance.ip}`;
  const wasRunning = findCondition(proxy, CONDITION_PROVISIONED)?.reason === 'InstanceRunning';
  return finish(proxy, {
    action: { type: 'none' },
    status: {
      ...servingStatus(
        instance,
        h,
        inp.desiredHash === undefined
          ? unresolved(inp)
          : { status: 'True', reason: 'InstanceRunning', message: running },
        'Provisioning',
      ),
      // Ready again: the replacement is over and its slot free.
      ...(h.phase === 'Ready' && proxy.status?.replacement ? { replacement: null } : {}),
    },
    events: wasRunning ? [] : [{ type: 'Normal', reason: 'Provisioned', message: running }],
    // The grace's end is a decision nothing else triggers: look again then.
    next: nextLook(clock.kind === 'waiting' && !view.repairedBefore ? clock.seconds : undefined, rotation),
  });
}

/** The earliest of the time-based decisions still ahead (the grace's end, the rotation's due time). */
function nextLook(graceSeconds: number | undefined, rotation: RotationClock): Next {
  const ahead = [graceSeconds, rotation.kind === 'waiting' ? rotation.seconds : undefined].filter(
    (s): s is number => s !== undefined,
  );
  return ahead.length === 0 ? { kind: 'steady' } : { kind: 'requeue', seconds: Math.min(...ahead) };
}

/**
 * A replacement that did not get a slot: the proxy keeps serving from its current instance
 * and asks again shortly. The reason is visible on the Provisioned condition. When slots are
 * held by replacements that failed permanently, the rollout is blocked (not merely waiting)
 * until a person acts: the reason says so and the message names them.
 */
export function replacementPendingStep(
  inp: Omit<Inputs, 'slot'> & { observation: { kind: 'found'; instance: Instance } },
  slot: Pick<SlotAnswer, 'cap' | 'failed'>,
  kind: SlotKind = 'rollout',
  paceWhy?: string,
): Step {
  const { proxy } = inp;
  const instance = inp.observation.instance;
  const h = healthOf(proxy, inp.verdict, proxy.status?.ip === instance.ip);
  const provider = proxy.spec.provider ?? '';
  const why = paceWhy ?? (kind === 'repair' ? 'unhealthy too long' : 'spec changed');
  const counted = kind === 'repair' ? 'replacements are in flight' : 'proxies are out of service';
  const blocked = slot.failed.length > 0;
  const message = blocked
    ? `${why}: rollout blocked at provider ${provider}: the replacements of ${slot.failed.join(', ')} failed permanently and hold ${slot.failed.length} of its ${slot.cap} --max-unavailable slots; instance ${instance.id} keeps serving. Fix their spec (or remove their permanent-failure annotation, or delete them) and the rollout continues`
    : `${why}: instance ${instance.id} will be replaced once fewer than ${slot.cap} of provider ${provider}'s ${counted} (--max-unavailable)`;
  return finish(proxy, {
    action: { type: 'none' },
    status: servingStatus(
      instance,
      h,
      { status: 'True', reason: blocked ? 'ReplacementBlocked' : 'ReplacementPending', message },
      proxy.status?.phase ?? 'Provisioning',
    ),
    events: [
      blocked
        ? { type: 'Warning', reason: 'ReplacementBlocked', message }
        : { type: 'Normal', reason: 'ReplacementPending', message },
    ],
    next: { kind: 'requeue', seconds: SLOT_POLL_SECONDS },
  });
}

/** A provider call that failed, as the state machine needs to know it. */
export interface ProviderFailure {
  provider: string;
  operation: ProviderOperation;
  kind: ProviderErrorKind;
  message: string;
}

/**
 * The phase a failure keeps: a running proxy stays in service (its health still follows the
 * probes), anything else stays where it was.
 */
function keptPhase(proxy: Proxy, h: Health): ProxyPhase {
  const phase = proxy.status?.phase ?? 'Pending';
  if (phase === 'Ready' || phase === 'Unhealthy') return h.phase ?? phase;
  return phase;
}

/**
 * Every provider failure. Only a create the provider calls hopeless fails the proxy; an error
 * from get, delete or list (a permission blip, a timeout, a cloud not ready) keeps the phase
 * and retries with backoff, and a quota retries slowly.
 */
export function providerErrorStep(inp: {
  proxy: Proxy;
  verdict?: HealthVerdict;
  failure: ProviderFailure;
  deleting: boolean;
}): Step {
  const { proxy, failure } = inp;
  const h = healthOf(proxy, inp.verdict, true);
  const log: LogIntent = {
    level: 'error',
    message: 'provider error',
    fields: {
      provider: failure.provider,
      operation: failure.operation,
      kind: failure.kind,
      err: failure.message,
    },
  };
  const keep = (
    provisioned: ConditionIntent<ProvisionedReason>,
    next: Next,
    event: EventIntent | undefined,
  ): Step =>
    finish(proxy, {
      action: { type: 'none' },
      status: {
        phase: inp.deleting ? 'Deleting' : keptPhase(proxy, h),
        provisioned,
        ...(inp.deleting ? {} : { healthy: h.condition, ...h.extra }),
      },
      events: event ? [event] : [],
      logs: [log],
      next,
    });
  if (!inp.deleting && failure.operation === 'create' && failure.kind === 'QuotaExceeded') {
    const message = `quota exceeded at provider ${failure.provider}: ${failure.message}; retrying in ${QUOTA_RETRY_SECONDS} s`;
    return keep(
      { status: 'False', reason: 'QuotaExceeded', message },
      { kind: 'requeue', seconds: QUOTA_RETRY_SECONDS },
      { type: 'Warning', reason: 'QuotaExceeded', message },
    );
  }
  if (!inp.deleting && failure.operation === 'create' && failure.kind === 'Permanent') {
    // A proxy that served keeps its slot (status.replacement stays): a bad image or machine
    // type then stops the rollout after --max-unavailable proxies instead of rolling through.
    const replacement = proxy.status?.replacement !== undefined;
    const reason = replacement ? 'ReplacementFailed' : 'ProvisioningFailed';
    const message = replacement
      ? `${failure.message}; this failed replacement holds one of provider ${failure.provider}'s --max-unavailable slots until its spec changes, its permanent-failure annotation is removed or it is deleted`
      : failure.message;
    return finish(proxy, {
      action: { type: 'none' },
      status: {
        phase: 'Failed',
        provisioned: { status: 'False', reason, message },
        healthy: AWAITING_PROBE,
      },
      events: [{ type: 'Warning', reason, message }],
      logs: [log],
      next: { kind: 'permanent', message: failure.message },
    });
  }
  const message = `provider ${failure.provider}: ${failure.operation} failed (${failure.kind}), retrying with backoff: ${failure.message}`;
  return keep(
    { status: 'False', reason: 'ProviderError', message },
    { kind: 'backoff' },
    { type: 'Warning', reason: 'ProviderError', message },
  );
}

/**
 * spec.provider names no configured provider: a configuration mistake, so nothing is lost.
 * A live proxy keeps its phase and is retried slowly (the providers file is read at start-up:
 * it heals after the fix and a restart). A Proxy being deleted keeps its finalizer while an
 * instance may exist, so the instance never leaks silently.
 */
export function unknownProviderStep(inp: {
  proxy: Proxy;
  verdict?: HealthVerdict;
  configured: readonly string[];
  deleting: boolean;
}): Step {
  const { proxy } = inp;
  const name = proxy.spec.provider ?? '';
  const configured = `configured: ${inp.configured.join(', ') || 'none'}`;
  const providerID = proxy.status?.providerID;
  const recorded = proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION];
  if (inp.deleting) {
    if (!providerID && recorded === undefined)
      return finish(proxy, { action: { type: 'release' }, next: { kind: 'steady' } });
    const what = providerID
      ? `instance ${providerID}`
      : `the instance it may have created (revision ${recorded})`;
    const message = `cannot delete ${what}: provider "${name}" is not configured (${configured}); the finalizer stays so the instance is not leaked — fix the providers config and restart the operator, or delete the instance yourself and remove the finalizer (README: Operations)`;
    return finish(proxy, {
      action: { type: 'none' },
      status: { phase: 'Deleting', provisioned: { status: 'False', reason: 'UnknownProvider', message } },
      events: [{ type: 'Warning', reason: 'UnknownProvider', message }],
      logs: [
        {
          level: 'error',
          message: 'cannot delete: provider not configured',
          fields: { provider: name, providerID },
        },
      ],
      next: { kind: 'requeue', seconds: CONFIG_RETRY_SECONDS },
    });
  }
  const h = healthOf(proxy, inp.verdict, true);
  const message = `provider "${name}" is not configured (${configured}); fix the providers config and restart the operator — retrying every ${CONFIG_RETRY_SECONDS} s`;
  return finish(proxy, {
    action: { type: 'none' },
    status: {
      phase: keptPhase(proxy, h),
      provisioned: { status: 'False', reason: 'UnknownProvider', message },
      healthy: h.condition,
      ...h.extra,
    },
    events: [{ type: 'Warning', reason: 'UnknownProvider', message }],
    logs: [{ level: 'error', message: 'provider not configured', fields: { provider: name } }],
    next: { kind: 'requeue', seconds: CONFIG_RETRY_SECONDS },
  });
}

/**
 * Deleting a Managed proxy: delete its instance (or, with none recorded, the instances an
 * interrupted create may have left), poll until the provider says NotFound, then release.
 */
export function deletionStep(proxy: Proxy, observation: Observation): Step {
  const deleting = (ids: readonly string[]): Step =>
    finish(proxy, {
      action: { type: 'delete', providerIDs: ids },
      status: { phase: 'Deleting' },
      events: [{ type: 'Normal', reason: 'Deleting', message: `deleting instance ${ids.join(', ')}` }],
      logs: [{ level: 'info', message: 'deleting instance', fields: { providerIDs: ids } }],
      next: { kind: 'requeue', seconds: DELETE_POLL_SECONDS },
    });
  switch (observation.kind) {
    case 'found':
      return deleting([observation.instance.id]);
    case 'not-found':
      return finish(proxy, {
        action: { type: 'release' },
        logs: [
          {
            level: 'info',
            message: 'instance gone; releasing finalizer',
            fields: { providerID: proxy.status?.providerID },
          },
        ],
        next: { kind: 'steady' },
      });
    case 'unprovisioned': {
      const strays = observation.strays ?? [];
      if (strays.length) return deleting(strays.map((i) => i.id));
      return finish(proxy, { action: { type: 'release' }, next: { kind: 'steady' } });
    }
  }
}

// The --max-unavailable budget as the decisions see it: the closed list of replacement
// triggers, the slot each needs, and the step of a replacement the budget refused.
import type { HealthyReason, ProvisionedReason, ProxyPhase } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import type { RepairHold } from '../repair-hold.js';
import type { SlotAnswer, SlotKind } from '../replacement-budget.js';
import { finish, healthOf, servingStatus } from './status.js';
import { type Inputs, SLOT_POLL_SECONDS, type Step } from './types.js';

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
 * out of service is paced: replacing a dead or not-yet-Ready one takes nothing out (a dead one
may be held instead: dead-instance-hold.ts), and a
 * drained proxy holds its slot since its drain began. A credentials rotation always takes one,
 * whatever the stored phase: the instance keeps serving with the credentials it was created
 * with until it is replaced, and a phase read while the probes switched would let a bulk
 * rotation (an incident response) take the whole fleet out at once. `repairHeld`: the proxy
 * is Unhealthy but its repair holds (repair-hold.ts: the cause looks shared), so it may well
 * be serving, and its new instance could not be seen to work either: its rollout is paced too.
 */
export function slotFor(
  trigger: ReplacementTrigger,
  phase: ProxyPhase | undefined,
  repairHeld = false,
): SlotKind | undefined {
  switch (trigger.kind) {
    case 'SpecChanged':
      if (phase === 'Ready') return 'rollout';
      // Not the rollout's slot: the held proxies, all Unhealthy, would wait on each other until
      // the shared cause ended, and a spec change that is the fix would never go out.
      if (repairHeld) return 'held-rollout';
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
export function pendingWhy(trigger: ReplacementTrigger): string | undefined {
  if (trigger.kind === 'SpecChanged' && trigger.credentials === true)
    return 'credentials rotated (it serves with its old ones meanwhile)';
  if (trigger.kind !== 'RotationDue') return undefined;
  return trigger.why
    ? 'rotation due (spec.rotation.whenCoolingDownOn)'
    : 'rotation due (spec.rotation.maxAgeSeconds)';
}

/** Why a replacement of this slot kind waits, unless its trigger says (pendingWhy). */
const WHY: Record<SlotKind, string> = {
  rollout: 'spec changed',
  repair: 'unhealthy too long',
  'held-rollout': 'spec changed while its repair is held (the cause looks shared: it may be serving)',
};

/** What a slot of this kind waits on, as the message says it. */
const COUNTED: Record<SlotKind, string> = {
  rollout: 'proxies are out of service',
  repair: 'replacements are in flight',
  'held-rollout': 'replacements are in flight or not yet Ready',
};

/** The reasons a replacement waiting for a slot shows: a closed set. */
export type WaitingReason = Extract<
  ProvisionedReason,
  'ReplacementPending' | 'ReplacementBlocked' | 'RepairHeld'
>;

/**
 * How a replacement that did not get a slot shows. A proxy whose repair holds shows
 * `RepairHeld` whatever its spec change waits on: during an outage an SRE (kubectl get px, the
 * repairs-held gauge) must see every held proxy as held; the message then says what it waits on
 * (a slot, or failed replacements). Otherwise `ReplacementBlocked` when replacements that failed
 * permanently hold the slots (a person must act), else `ReplacementPending`.
 */
export function waitingReason(wait: { held: boolean; blocked: boolean }): {
  reason: WaitingReason;
  eventType: 'Normal' | 'Warning';
} {
  if (wait.held) return { reason: 'RepairHeld', eventType: 'Warning' };
  if (wait.blocked) return { reason: 'ReplacementBlocked', eventType: 'Warning' };
  return { reason: 'ReplacementPending', eventType: 'Normal' };
}

/**
 * A replacement that did not get a slot: the proxy keeps serving from its current instance
 * and asks again shortly. The reason is visible on the Provisioned condition (waitingReason).
 * When slots are held by replacements that failed permanently, the rollout is blocked (not
 * merely waiting) until a person acts: the message names them. `hold`: the proxy's repair
 * holds (its spec change takes a held-rollout slot); the message begins with the hold's cause
 * and the repairs-held metric counts it.
 */
export function replacementPendingStep(
  inp: Omit<Inputs, 'slot'> & { observation: { kind: 'found'; instance: Instance } },
  slot: Pick<SlotAnswer, 'cap' | 'failed'>,
  kind: SlotKind = 'rollout',
  paceWhy?: string,
  hold?: Extract<RepairHold, { kind: 'hold' }>,
): Step {
  const { proxy } = inp;
  const instance = inp.observation.instance;
  const h = healthOf(proxy, inp.verdict, proxy.status?.ip === instance.ip);
  const provider = proxy.spec.provider ?? '';
  const why = paceWhy ?? WHY[kind];
  const counted = COUNTED[kind];
  const blocked = slot.failed.length > 0;
  const wait = blocked
    ? `${why}: rollout blocked at provider ${provider}: the replacements of ${slot.failed.join(', ')} failed permanently and hold ${slot.failed.length} of its ${slot.cap} --max-unavailable slots; instance ${instance.id} keeps serving. Fix their spec (or remove their permanent-failure annotation, or delete them) and the rollout continues`
    : `${why}: instance ${instance.id} will be replaced once fewer than ${slot.cap} of provider ${provider}'s ${counted} (--max-unavailable)`;
  const message = hold ? `${hold.message}; ${wait}` : wait;
  const { reason, eventType } = waitingReason({ held: hold !== undefined, blocked });
  return finish(proxy, {
    action: { type: 'none' },
    status: servingStatus(
      instance,
      h,
      { status: 'True', reason, message },
      proxy.status?.phase ?? 'Provisioning',
    ),
    events: [{ type: eventType, reason, message }],
    ...(hold ? { repairHeld: hold.reason } : {}),
    next: { kind: 'requeue', seconds: inp.pollSeconds ?? SLOT_POLL_SECONDS },
  });
}

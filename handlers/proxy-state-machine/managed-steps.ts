// The Managed reconciler's state machine: one action from (spec, status, provider get, the
// budget's answer), one step per kind of provider answer and per replacement trigger.
import {
  CONDITION_PROVISIONED,
  type Proxy,
  type ReplacementStatus,
  SPEC_HASH_ANNOTATION,
} from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { isDead } from '../dead-instance-hold.js';
import type { RepairHold } from '../repair-hold.js';
import type { SlotKind } from '../replacement-budget.js';
import { rotationClock, unhealthyClock } from './clocks.js';
import { drainingStep, type FoundView, runningStep, startingStep } from './serving-steps.js';
import { pendingWhy, replacementPendingStep, type ReplacementTrigger, slotFor } from './slot-answer.js';
import {
  findCondition,
  finish,
  type Health,
  healthOf,
  noInstanceStatus,
  replacementRecord,
  replacingMessage,
  replacingStatus,
  servingStatus,
  unresolved,
} from './status.js';
import {
  CLOUD_INIT_RETRY_SECONDS,
  type EventIntent,
  type Inputs,
  type LogIntent,
  POLL_SECONDS,
  SLOT_POLL_SECONDS,
  type Step,
} from './types.js';

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
        : createStep(inp.proxy, inp.desiredHash, observation.strays ?? [], inp.pollSeconds);
    case 'not-found':
      return goneStep(inp);
    case 'found':
      return foundStep(inp, observation.instance);
  }
}

/**
 * The slot this run's decision needs, if any: the shell asks the replacement budget for it and
 * passes the answer in as Inputs.slot, so the decision is made once, with the budget's answer.
 */
export function slotWanted(inp: Omit<Inputs, 'slot'>): SlotKind | undefined {
  if (inp.observation.kind !== 'found') return undefined;
  const instance = inp.observation.instance;
  const view = foundView(inp, instance);
  const trigger = triggerOf(inp, instance, view);
  return trigger && slotFor(trigger, inp.proxy.status?.phase, rolloutHold(inp, trigger, view) !== undefined);
}

/**
 * The hold a spec change finds the proxy under, if it is Unhealthy with its repair held
 * (repair-hold.ts): the cause looks shared, so the proxy may be serving and its rollout is paced
 * (slotFor). Asked whatever the Unhealthy clock says: a proxy in its grace may be serving just as
 * well. A proxy whose repair would go ahead looks dead, and its replacement waits for nothing.
 */
function rolloutHold(
  inp: Omit<Inputs, 'slot'>,
  trigger: ReplacementTrigger,
  view: FoundView,
): Extract<RepairHold, { kind: 'hold' }> | undefined {
  if (trigger.kind !== 'SpecChanged' || view.kind !== 'running') return undefined;
  if (inp.proxy.status?.phase !== 'Unhealthy') return undefined;
  const hold = inp.repairHold?.();
  return hold?.kind === 'hold' ? hold : undefined;
}

/** A found instance as the decisions read it: still starting, or running with its health and clocks. */

export function foundView(inp: Omit<Inputs, 'slot'>, instance: Instance): FoundView {
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

export function triggerOf(
  inp: Omit<Inputs, 'slot'>,
  instance: Instance,
  view: FoundView,
): ReplacementTrigger | undefined {
  if (isDead(instance)) return { kind: 'InstanceDead' };
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

export function foundStep(inp: Inputs, instance: Instance): Step {
  const view = foundView(inp, instance);
  const trigger = triggerOf(inp, instance, view);
  if (trigger) {
    if (trigger.kind === 'Unhealthy' && view.kind === 'running') {
      const hold = inp.repairHold?.();
      if (hold?.kind === 'hold') return repairHeldStep(inp, instance, view.h, hold);
    }
    // Deleting is irreversible: many serving proxies reported dead at once are kept.
    if (trigger.kind === 'InstanceDead' && inp.deadHold?.kind === 'hold') {
      const h = healthOf(inp.proxy, inp.verdict, inp.proxy.status?.ip === instance.ip);
      return repairHeldStep(inp, instance, h, inp.deadHold);
    }
    const held = rolloutHold(inp, trigger, view);
    const kind = slotFor(trigger, inp.proxy.status?.phase, held !== undefined);
    const slot = kind && inp.slot(kind);
    // Waiting, a held proxy still shows held (and counts in the metric): waitingReason.
    if (kind && slot && !slot.granted)
      return replacementPendingStep(
        { ...inp, observation: { kind: 'found', instance } },
        slot,
        kind,
        pendingWhy(trigger),
        held,
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
 * An Unhealthy proxy past its grace whose repair holds (repair-hold.ts), or a proxy whose
 * instance is reported dead while too many are (dead-instance-hold.ts): it keeps its instance,
 * says why on the Provisioned condition (one Warning Event as the hold begins: the message is
 * stable while it lasts) and looks again shortly; when the hold lifts, the repair goes ahead.
 */
export function repairHeldStep(
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
    next: { kind: 'requeue', seconds: inp.pollSeconds ?? SLOT_POLL_SECONDS },
  });
}

/** The step of a trigger that got its slot (or needs none). */
export function triggeredStep(inp: Inputs, instance: Instance, trigger: ReplacementTrigger): Step {
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
        pollSeconds: inp.pollSeconds,
      });
    }
    case 'Unhealthy': {
      const why = `unhealthy (${trigger.reason}) since ${trigger.since}, longer than spec.rotation.unhealthyAfterSeconds / --replace-unhealthy-after (${inp.autopilot?.unhealthyAfterSeconds} s)`;
      return replaceStep(proxy, instance, why, {
        record: { cause: 'Unhealthy', startedAt: (now ?? new Date()).toISOString() },
        event: { type: 'Warning', reason: 'ReplacingUnhealthy' },
        log: { level: 'warn', message: 'replacing an unhealthy instance' },
        pollSeconds: inp.pollSeconds,
      });
    }
    case 'Drained':
      return replaceStep(proxy, instance, `rotation (spec.rotation): drained since ${trigger.since}`, {
        event: { type: 'Normal', reason: 'Replacing' },
        log: { level: 'info', message: 'replacing a drained instance' },
        pollSeconds: inp.pollSeconds,
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
export function replaceStep(
  proxy: Proxy,
  instance: Instance,
  why: string,
  how: {
    record?: ReplacementStatus;
    event?: Pick<EventIntent, 'type' | 'reason'>;
    log: Pick<LogIntent, 'level' | 'message'>;
    /** Inputs.pollSeconds. */
    pollSeconds?: number;
  },
): Step {
  return finish(proxy, {
    action: { type: 'delete', providerIDs: [instance.id] },
    startsReplacement: how.record?.cause,
    status: replacingStatus(instance, why, how.record),
    events: how.event ? [{ ...how.event, message: replacingMessage(instance, why) }] : [],
    logs: [{ ...how.log, fields: { providerID: instance.id } }],
    next: { kind: 'requeue', seconds: how.pollSeconds ?? POLL_SECONDS },
  });
}

/** No instance and the desired revision unknown: nothing can be created yet. */
export function unresolvedStep(inp: Inputs): Step {
  return finish(inp.proxy, {
    action: { type: 'none' },
    status: noInstanceStatus('Pending', unresolved(inp)),
    next: { kind: 'requeue', seconds: CLOUD_INIT_RETRY_SECONDS },
  });
}

/** No instance: create one, first deleting what an interrupted create of an earlier revision left. */
export function createStep(
  proxy: Proxy,
  desiredHash: string,
  strays: readonly Instance[],
  pollSeconds = POLL_SECONDS,
): Step {
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
    next: { kind: 'requeue', seconds: pollSeconds },
  });
}

/** The recorded instance is gone: forget it, so the next run creates anew. */
export function goneStep(inp: Inputs): Step {
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

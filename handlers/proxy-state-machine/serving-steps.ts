// A Managed instance that is not being replaced: starting, running (the phase follows health),
// or draining before a rotation.
import { CONDITION_PROVISIONED } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { DEFAULT_ROTATION_DRAIN_SECONDS, type RotationClock, type UnhealthyClock } from './clocks.js';
import { findCondition, finish, type Health, instanceStatus, unresolved, servingStatus } from './status.js';
import { type Inputs, type Next, POLL_SECONDS, type Step } from './types.js';

/** What a found instance is, as the managed steps read it (serving-steps act on it). */
export type FoundView =
  | { kind: 'starting' }
  | { kind: 'running'; h: Health; clock: UnhealthyClock; rotation: RotationClock; repairedBefore: boolean };

/**
 * The instance exists but has no address yet. The provider's reason it is not starting (a
 * Pod's ImagePullBackOff, a crash loop, an unschedulable Pod) is shown, not hidden behind
 * "starting"; the Event marks the transition.
 */
export function startingStep(inp: Inputs, instance: Instance): Step {
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
    next: { kind: 'requeue', seconds: inp.pollSeconds ?? POLL_SECONDS },
  });
}

/**
 * A rotated proxy drains out of leases on its instance. `starting`: the drain begins now (its
 * slot is granted: the record, the Event and the metric start); else it goes on, writing
 * nothing new, and looks again when it ends.
 */
export function drainingStep(
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
export function runningStep(inp: Inputs, instance: Instance, view: FoundView & { kind: 'running' }): Step {
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
export function nextLook(graceSeconds: number | undefined, rotation: RotationClock): Next {
  const ahead = [graceSeconds, rotation.kind === 'waiting' ? rotation.seconds : undefined].filter(
    (s): s is number => s !== undefined,
  );
  return ahead.length === 0 ? { kind: 'steady' } : { kind: 'requeue', seconds: Math.min(...ahead) };
}

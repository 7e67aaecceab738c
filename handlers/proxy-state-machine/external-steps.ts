// External proxies: nothing to provision; the phase follows health.
import type { Proxy } from '../../crds/proxy-types.js';
import { unhealthyClock } from './clocks.js';
import { finish, healthOf } from './status.js';
import type { Autopilot, HealthVerdict, Step } from './types.js';

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

import type { Proxy } from '../crds/proxy-types.js';
import type { StatusIntent } from './proxy-state-machine.js';
import type { StatusOverride } from './proxy-status.js';

/** What the reconciler does about status.exitIP: a merge-patch value and maybe an Event. */
export interface ExitIPUpdate {
  /** The new status.exitIP; null removes it. */
  exitIP: string | null;
  event?: { reason: 'ExitIPChanged' | 'ExitIPCleared'; message: string };
}

/** What serves the proxy once this run's status is written: the instance and its address. */
export interface ServedBy {
  providerID: string | null | undefined;
  ip: string | null | undefined;
}

/**
 * What serves the proxy once a step's status is written: the providerID a create returned
 * (`override`) over the step's, the step's over the stored one; null in the step clears it.
 * Pure.
 */
export function servedAfter(
  proxy: Proxy,
  status: Pick<StatusIntent, 'providerID' | 'ip'> | undefined,
  override: Pick<StatusOverride, 'providerID'>,
): ServedBy {
  return {
    providerID:
      override.providerID ??
      (status?.providerID === undefined ? proxy.status?.providerID : status.providerID),
    ip: status?.ip === undefined ? proxy.status?.ip : status.ip,
  };
}

/**
 * Pure: status.exitIP against the exit IP the engine last read through what serves the proxy
 * now (`observed`, read through `now`'s instance and address only). The exit IP follows the
 * instance: when the instance or the address changes, the stored one is cleared (so exitIP
 * selectors stop matching) until it is read through the new one. Otherwise transition-only:
 * nothing while they agree or nothing was read (a failed read keeps the last value). Without
 * spec.healthCheck.exitIPURL a stored value is removed, quietly: nobody reads it any more.
 */
export function exitIPUpdate(
  proxy: Proxy,
  now: ServedBy,
  observed: string | undefined,
): ExitIPUpdate | undefined {
  if (proxy.metadata.deletionTimestamp) return undefined;
  const stored = proxy.status?.exitIP;
  if (proxy.spec.healthCheck.exitIPURL === undefined)
    return stored === undefined ? undefined : { exitIP: null };
  const moved =
    (now.providerID ?? null) !== (proxy.status?.providerID ?? null) ||
    (now.ip ?? null) !== (proxy.status?.ip ?? null);
  if (moved && stored !== undefined) {
    const what = now.providerID ? `instance ${now.providerID}` : now.ip ? `address ${now.ip}` : 'no instance';
    return observed !== undefined
      ? {
          exitIP: observed,
          event: {
            reason: 'ExitIPChanged',
            message: `exit IP changed from ${stored} to ${observed} (${what})`,
          },
        }
      : {
          exitIP: null,
          event: {
            reason: 'ExitIPCleared',
            message: `exit IP ${stored} cleared: the proxy moved to ${what}; it is read again through it`,
          },
        };
  }
  if (observed === undefined || observed === stored) return undefined;
  return {
    exitIP: observed,
    event: {
      reason: 'ExitIPChanged',
      message:
        stored === undefined
          ? `exit IP is ${observed} (first read through the proxy)`
          : `exit IP changed from ${stored} to ${observed}`,
    },
  };
}

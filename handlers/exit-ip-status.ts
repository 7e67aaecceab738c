import type { Proxy } from '../crds/proxy-types.js';

/** What the reconciler does about status.exitIP: a merge-patch value and maybe an Event. */
export interface ExitIPUpdate {
  /** The new status.exitIP; null removes it. */
  exitIP: string | null;
  event?: { reason: 'ExitIPChanged'; message: string };
}

/**
 * Pure: status.exitIP against the exit IP the engine last read at the proxy's current address
 * (`observed`). Transition-only: nothing while they agree or nothing was read (a failed read
 * keeps the last value). Without spec.healthCheck.exitIPURL a stored value is removed,
 * quietly: nobody reads it any more, so it would only go stale.
 */
export function exitIPUpdate(proxy: Proxy, observed: string | undefined): ExitIPUpdate | undefined {
  if (proxy.metadata.deletionTimestamp) return undefined;
  const stored = proxy.status?.exitIP;
  if (proxy.spec.healthCheck.exitIPURL === undefined)
    return stored === undefined ? undefined : { exitIP: null };
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

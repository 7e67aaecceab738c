// Whether the autopilot may replace (delete) a Managed proxy's instance that the provider
// reports Stopped or Terminated, or must hold because the report more likely has one shared
// cause: a provider glitch or plugin bug misreporting state, an account suspension, a
// maintenance event that stops instances and would restart them. Deleting is irreversible
// (the instance, its IP and its reputation are gone), so many serving proxies reported dead at
// once hold, as repairs do (repair-hold.ts), on the same percentage; a few are replaced at once.
import type { Instance } from '../providers/contract.js';
import { judgedByProbes, unhealthyAllowed, type RepairHold } from './repair-hold.js';

/**
 * The fewest dead serving proxies that hold. One or two instances dying together happens by
 * chance (a host failure, a spot reclaim); three reported at once, over the share, is not.
 */
export const MIN_INSTANCES_DEAD = 3;

/** A provider's serving proxies, and how many of them the provider reports dead. */
export interface DeadShare {
  dead: number;
  total: number;
}

/** Whether the provider reports an instance dead: the InstanceDead trigger (managed-steps.ts). */
export function isDead(instance: Pick<Instance, 'state'>): boolean {
  return instance.state === 'Stopped' || instance.state === 'Terminated';
}

/** A Proxy as the census reads it from the cache. */
export interface ServingView {
  providerID: string | undefined;
  phase: string | undefined;
}

/**
 * The share: the serving proxies (an instance recorded, judged by the probes: Ready or
 * Unhealthy, as the repair hold counts) whose instance is in `deadIDs`. `own`: the asking
 * proxy's instance, dead by its own get, counted whatever its phase or the listing say (a
 * listing read before it died must not make it look alone).
 */
export function deadShare(
  proxies: Iterable<ServingView>,
  deadIDs: ReadonlySet<string>,
  own: string,
): DeadShare {
  const serving = new Set<string>([own]);
  for (const p of proxies) if (p.providerID && judgedByProbes(p.phase)) serving.add(p.providerID);
  let dead = 0;
  for (const id of serving) if (id === own || deadIDs.has(id)) dead++;
  return { dead, total: serving.size };
}

/**
 * The decision: hold when more than `maxUnhealthyPercent` (the repair hold's flag) and at
 * least MIN_INSTANCES_DEAD of the provider's serving proxies are reported dead at once. It
 * lifts by itself when the share falls (instances come back, or an SRE replaces some). The
 * message names the count (it changes only as instances die or come back).
 */
export function deadInstanceHold(i: {
  provider: string;
  share: DeadShare;
  maxUnhealthyPercent: number;
}): RepairHold {
  const { dead, total } = i.share;
  if (i.maxUnhealthyPercent >= 100) return { kind: 'go' };
  if (dead < MIN_INSTANCES_DEAD || dead <= unhealthyAllowed(total, i.maxUnhealthyPercent))
    return { kind: 'go' };
  return {
    kind: 'hold',
    reason: 'ProviderReportsInstancesDead',
    message: `replacement held: provider ${i.provider} reports ${dead} of its ${total} serving proxies' instances stopped or terminated at once (more than ${i.maxUnhealthyPercent}%, --repair-hold-unhealthy-percent): a shared cause (a provider incident or maintenance, an account suspension, a plugin misreporting state) is likelier than that many dead instances, and deleting is irreversible. Check the provider's console and status page; the hold lifts when instances run again, or delete the dead instances (or their Proxies) to have them replaced`,
  };
}

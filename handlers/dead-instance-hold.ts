// Whether the autopilot may replace (delete) a Managed proxy's instance that the provider
// reports Stopped or Terminated, or must hold because the report more likely has one shared
// cause: a provider glitch or plugin bug misreporting state, an account suspension, a
// maintenance event that stops instances and would restart them. Deleting is irreversible
// (the instance, its IP and its reputation are gone), so many serving proxies reported dead at
// once hold, as repairs do (repair-hold.ts), on the same percentage; a few are replaced at once.
// And as repairs do, a share over the percentage holds a dead instance only if its proxy's
// namespace (its team) is hit too: one team's mass stop or eviction (its zone's maintenance,
// its Pods' node drained) does not keep another team's lone dead instance from being replaced.
import type { Instance } from '../providers/contract.js';
import { judgedByProbes, teamWithin, unhealthyAllowed, type RepairHold } from './repair-hold.js';

/**
 * The fewest dead serving proxies that hold. One or two instances dying together happens by
 * chance (a host failure, a spot reclaim); three reported at once, over the share, is not.
 */
export const MIN_INSTANCES_DEAD = 3;

/** Some serving proxies, and how many of them the provider reports dead. */
export interface DeadCount {
  dead: number;
  total: number;
}

/** A provider's serving proxies reported dead, and the asking proxy's namespace's part of them. */
export interface DeadShare extends DeadCount {
  team: DeadCount;
}

/** Whether the provider reports an instance dead: the InstanceDead trigger (managed-steps.ts). */
export function isDead(instance: Pick<Instance, 'state'>): boolean {
  return instance.state === 'Stopped' || instance.state === 'Terminated';
}

/** A Proxy as the census reads it from the cache. */
export interface ServingView {
  providerID: string | undefined;
  phase: string | undefined;
  namespace: string;
}

/**
 * The share: the serving proxies (an instance recorded, judged by the probes: Ready or
 * Unhealthy, as the repair hold counts) whose instance is in `deadIDs`, and the part of
 * `namespace` (the asker's). `own`: the asking proxy's instance, dead by its own get, counted
 * whatever its phase or the listing say (a listing read before it died must not make it look
 * alone).
 */
export function deadShare(
  proxies: Iterable<ServingView>,
  deadIDs: ReadonlySet<string>,
  own: string,
  namespace: string,
): DeadShare {
  const serving = new Map<string, string>([[own, namespace]]);
  for (const p of proxies)
    if (p.providerID && p.providerID !== own && judgedByProbes(p.phase))
      serving.set(p.providerID, p.namespace);
  const share: DeadShare = { dead: 0, total: 0, team: { dead: 0, total: 0 } };
  for (const [id, ns] of serving) {
    const dead = id === own || deadIDs.has(id) ? 1 : 0;
    share.dead += dead;
    share.total++;
    if (ns !== namespace) continue;
    share.team.dead += dead;
    share.team.total++;
  }
  return share;
}

/**
 * The decision: hold when more than `maxUnhealthyPercent` (the repair hold's flag) and at
 * least MIN_INSTANCES_DEAD of the provider's serving proxies are reported dead at once, and the
 * asker's namespace's part is over the percentage too (teamWithin, as the repair hold: a
 * namespace too small for the percentage to allow one follows the provider's verdict). A team
 * whose own instances are within it is not reached by the cause, and its dead ones are
 * replaced: as many as it may lose by chance anyway. It lifts by itself when the share falls
 * (instances come back, or an SRE replaces some). The message names the counts (they change
 * only as instances die or come back), the team's its own only.
 */
export function deadInstanceHold(i: {
  provider: string;
  namespace: string;
  share: DeadShare;
  maxUnhealthyPercent: number;
}): RepairHold {
  const { dead, total, team } = i.share;
  const percent = i.maxUnhealthyPercent;
  if (percent >= 100) return { kind: 'go' };
  if (dead < MIN_INSTANCES_DEAD || dead <= unhealthyAllowed(total, percent)) return { kind: 'go' };
  if (teamWithin({ unhealthy: team.dead, total: team.total }, percent)) return { kind: 'go' };
  return {
    kind: 'hold',
    reason: 'ProviderReportsInstancesDead',
    message: `replacement held: provider ${i.provider} reports ${dead} of its ${total} serving proxies' instances stopped or terminated at once (more than ${percent}%, --repair-hold-unhealthy-percent), ${team.dead} of namespace ${i.namespace}'s ${team.total} (over it too, or too few to judge apart): a shared cause (a provider incident or maintenance, an account suspension, a plugin misreporting state) is likelier than that many dead instances, and deleting is irreversible. Check the provider's console and status page; the hold lifts when instances run again, or delete the dead instances (or their Proxies) to have them replaced`,
  };
}

import type { Instance } from '../providers/contract.js';
import { sweepVerdict, type SweepScope, type SweepVerdict, type Wanted } from './orphans.js';

/**
 * Duplicate instances of one revision: two creates of the same Proxy and spec revision both
 * landed (an idempotency token that missed under eventual consistency). The orphan sweep
 * spares both as Wanted (the revision matches), so without this they bill forever.
 */

/** Why the sweep deletes an instance that its live Proxy's revision would otherwise vouch for. */
export type DuplicateReason = 'DuplicateRevision';

export type SweepDecision = SweepVerdict | { collect: true; reason: DuplicateReason; keeper: Instance };

/**
 * The one instance of a same-revision group that stays: the one the Proxy's status records,
 * else the oldest (ties by id, so every sweep picks the same one).
 */
function keeperOf(group: readonly Instance[], recorded: string | undefined): Instance {
  const found = group.find((i) => i.id === recorded);
  if (found) return found;
  return [...group].sort(
    (a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.id.localeCompare(b.id),
  )[0]!;
}

/**
 * For each extra instance of a live Proxy's wanted revision, the instance kept instead. Only
 * the revision the Proxy is on (its spec-hash annotation) is grouped: any other revision is
 * either the recorded instance or a StaleRevision the orphan rules already collect. Terminated
 * instances bill nothing and are not counted.
 */
export function findDuplicates(
  instances: readonly Instance[],
  live: ReadonlyMap<string, Wanted>,
): Map<string, Instance> {
  const groups = new Map<string, Instance[]>();
  for (const i of instances) {
    const wanted = live.get(i.uid);
    if (!wanted || i.revision === '' || i.revision !== wanted.revision || i.state === 'Terminated') continue;
    const key = `${i.uid}\u0000${i.revision}`;
    groups.set(key, [...(groups.get(key) ?? []), i]);
  }
  const extras = new Map<string, Instance>();
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    const keeper = keeperOf(group, live.get(group[0]!.uid)?.providerID);
    for (const i of group) if (i.id !== keeper.id) extras.set(i.id, keeper);
  }
  return extras;
}

/**
 * The sweep's decision for every instance: the orphan rules (sweepVerdict), then an instance
 * they spare as Wanted is still collected when it is an extra of its revision and old enough
 * (the same age grace as orphans: a create in flight is never raced).
 */
export function sweepDecisions(
  instances: readonly Instance[],
  live: ReadonlyMap<string, Wanted>,
  scope: SweepScope,
  now: Date,
  minAgeSeconds: number,
): Array<{ instance: Instance; decision: SweepDecision }> {
  const extras = findDuplicates(
    instances.filter((i) => sweepVerdict(i, live, scope, now, minAgeSeconds).reason === 'Wanted'),
    live,
  );
  return instances.map((instance) => {
    const verdict = sweepVerdict(instance, live, scope, now, minAgeSeconds);
    const keeper = extras.get(instance.id);
    if (verdict.collect || verdict.reason !== 'Wanted' || !keeper) return { instance, decision: verdict };
    if (now.getTime() - instance.createdAt.getTime() < minAgeSeconds * 1000)
      return { instance, decision: { collect: false, reason: 'TooYoung' } };
    return { instance, decision: { collect: true, reason: 'DuplicateRevision', keeper } };
  });
}

/** A person-readable why, for the sweep's log line. */
export function explainDuplicate(keeper: Instance): string {
  return `a second instance of the revision its live Proxy is on (${keeper.id} is kept)`;
}

import type { Instance } from '../providers/contract.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';

/** The instances a live Proxy may own: the one status records, and the revision being created. */
export interface Wanted {
  providerID?: string;
  /** The spec-hash annotation: written before every create, so it names any unrecorded instance. */
  revision?: string;
}

/** Whose instances this operator may sweep: its own owner identity, in the namespaces it watches. */
export interface SweepScope {
  /** `--cluster-name`: the LABEL_OWNER this operator writes at create. */
  owner: string;
  /** `--watch-namespace`; every namespace when unset. */
  namespace?: string;
}

/** Why the sweep deletes an instance. */
export type OrphanReason = 'ProxyGone' | 'StaleRevision';

/**
 * Why the sweep leaves an instance alone. OtherOwner: another operator's (a provider's list
 * never returns it; checked anyway). UnwatchedNamespace: its Proxy lives where this operator
 * does not watch, so the cache cannot vouch for it. Wanted: its live Proxy records it or is
 * creating its revision. Unrevisioned: its live Proxy owns it, but without a revision it
 * cannot be told apart from the wanted one. TooYoung: a create may be in flight (instance
 * made, Proxy not yet written).
 */
export const SPARE_REASONS = [
  'OtherOwner',
  'UnwatchedNamespace',
  'Wanted',
  'Unrevisioned',
  'TooYoung',
] as const;
export type SpareReason = (typeof SPARE_REASONS)[number];

export type SweepVerdict = { collect: true; reason: OrphanReason } | { collect: false; reason: SpareReason };

const EXPLAINED: Record<OrphanReason, string> = {
  ProxyGone: 'no live Proxy has its UID',
  StaleRevision: 'a stale revision of a live Proxy (left by an interrupted create)',
};

/** What every Proxy in the cache wants, by UID. Read AFTER listing the instances. */
export function wantedBy(proxies: readonly Proxy[]): Map<string, Wanted> {
  return new Map(
    proxies.map((p) => [
      p.metadata.uid ?? '',
      { providerID: p.status?.providerID, revision: p.metadata.annotations?.[SPEC_HASH_ANNOTATION] },
    ]),
  );
}

/**
 * The sweep's decision for one instance. Scope comes first: an instance of another owner, or
 * of a namespace this operator does not watch, is never judged against this operator's cache
 * (its Proxy is simply not in it). Then: collectable when no live Proxy wants it (its UID is
 * gone, or it is a revision its live Proxy neither records nor is creating), and only once old
 * enough that an in-flight create cannot be raced. `live` must be read AFTER the instances were
 * listed, so a Proxy created or recorded meanwhile is seen.
 */
export function sweepVerdict(
  instance: Instance,
  live: ReadonlyMap<string, Wanted>,
  scope: SweepScope,
  now: Date,
  minAgeSeconds: number,
): SweepVerdict {
  if (instance.owner !== scope.owner) return { collect: false, reason: 'OtherOwner' };
  if (scope.namespace !== undefined && instance.namespace !== scope.namespace)
    return { collect: false, reason: 'UnwatchedNamespace' };
  const verdict = wantedVerdict(instance, live);
  if (verdict.collect && now.getTime() - instance.createdAt.getTime() < minAgeSeconds * 1000)
    return { collect: false, reason: 'TooYoung' };
  return verdict;
}

/** Whether a live Proxy wants the instance, scope and age aside. */
function wantedVerdict(instance: Instance, live: ReadonlyMap<string, Wanted>): SweepVerdict {
  const wanted = live.get(instance.uid);
  if (!wanted) return { collect: true, reason: 'ProxyGone' };
  if (wanted.providerID === instance.id || wanted.revision === instance.revision)
    return { collect: false, reason: 'Wanted' };
  if (instance.revision === '') return { collect: false, reason: 'Unrevisioned' };
  return { collect: true, reason: 'StaleRevision' };
}

/** A person-readable why, for the sweep's log line. */
export function explainOrphan(reason: OrphanReason): string {
  return EXPLAINED[reason];
}

/** The instances to delete, each with why. */
export function findOrphans(
  instances: readonly Instance[],
  live: ReadonlyMap<string, Wanted>,
  scope: SweepScope,
  now: Date,
  minAgeSeconds: number,
): Array<{ instance: Instance; reason: OrphanReason }> {
  const found: Array<{ instance: Instance; reason: OrphanReason }> = [];
  for (const instance of instances) {
    const v = sweepVerdict(instance, live, scope, now, minAgeSeconds);
    if (v.collect) found.push({ instance, reason: v.reason });
  }
  return found;
}

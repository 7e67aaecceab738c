import type { Instance } from '../providers/contract.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../crds/proxy-types.js';

/** The instances a live Proxy may own: the one status records, and the revision being created. */
export interface Wanted {
  providerID?: string;
  /** The spec-hash annotation: written before every create, so it names any unrecorded instance. */
  revision?: string;
}

/** What every Proxy in the cache wants, by UID. Read AFTER listing the instances. */
export function wantedBy(proxies: readonly Proxy[]): Map<string, Wanted> {
  return new Map(
    proxies.map((p) => [
      p.metadata.uid ?? '',
      { providerID: p.status?.providerID, revision: p.metadata.annotations?.[SPEC_HASH_ANNOTATION] },
    ]),
  );
}

/** Why an instance is collectable, or undefined when a live Proxy wants it. */
export function orphanReason(instance: Instance, live: ReadonlyMap<string, Wanted>): string | undefined {
  const wanted = live.get(instance.uid);
  if (!wanted) return 'no live Proxy has its UID';
  if (wanted.providerID === instance.id || wanted.revision === instance.revision) return undefined;
  // Without a revision label it cannot be told apart from the one its Proxy owns: spared.
  if (instance.revision === '') return undefined;
  return 'a stale revision of a live Proxy (left by an interrupted create)';
}

/**
 * Instances to delete: no live Proxy wants them (its UID is gone, or it is a revision its live
 * Proxy neither records nor is creating), and old enough that an in-flight create (instance
 * made, Proxy not yet written) cannot be raced. `live` must be read AFTER the instances were
 * listed, so a Proxy created or recorded meanwhile is seen.
 */
export function findOrphans(
  instances: readonly Instance[],
  live: ReadonlyMap<string, Wanted>,
  now: Date,
  minAgeSeconds: number,
): Instance[] {
  return instances.filter(
    (i) =>
      orphanReason(i, live) !== undefined && now.getTime() - i.createdAt.getTime() >= minAgeSeconds * 1000,
  );
}

import type { Instance } from '../providers/contract.js';

/**
 * Instances to delete: tagged with a UID that no live Proxy has, and old enough that an
 * in-flight create (instance made, Proxy status not yet written) cannot be raced.
 * `liveUIDs` must be read AFTER the instances were listed, so a Proxy created meanwhile
 * is seen as live.
 */
export function findOrphans(
  instances: readonly Instance[],
  liveUIDs: ReadonlySet<string>,
  now: Date,
  minAgeSeconds: number,
): Instance[] {
  return instances.filter(
    (i) => !liveUIDs.has(i.uid) && now.getTime() - i.createdAt.getTime() >= minAgeSeconds * 1000,
  );
}

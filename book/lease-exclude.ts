// A lease request's `exclude` (issue 48): proxies the asker must not be given, by id
// (namespace/name). A crawler asking ahead names the proxies it already holds, so a grant is
// always one more proxy for it, whatever other owners' leases do to the ranking.
import type { Candidate } from './lease-selection.js';

/** The most proxy ids one request may exclude (the API's bound on the body field). */
export const MAX_EXCLUDED = 100;

/** The candidates not excluded, in the same order. */
export function* withoutExcluded(
  free: Iterable<Candidate>,
  exclude: ReadonlySet<string>,
): Generator<Candidate> {
  for (const candidate of free) if (!exclude.has(candidate.proxy.id)) yield candidate;
}

/** Whether a request excludes anything (an empty set is no exclusion). */
export function excludes(exclude: ReadonlySet<string> | undefined): exclude is ReadonlySet<string> {
  return exclude !== undefined && exclude.size > 0;
}

/**
 * A ranking walk's skip predicate (redis-acquire-walk.ts): outside the token's scope, or
 * excluded. Each excluded proxy the walk stepped over is noted in `skipped`: a match the
 * refusal counts as leasable and taken (all_busy), as the memory store's explanation does.
 */
export function skipExcluded(
  outside: ((proxyID: string) => boolean) | undefined,
  exclude: ReadonlySet<string> | undefined,
  skipped: Set<string>,
): ((proxyID: string) => boolean) | undefined {
  if (!excludes(exclude)) return outside;
  return (id) => {
    if (outside?.(id) === true) return true;
    if (!exclude.has(id)) return false;
    skipped.add(id);
    return true;
  };
}

// Targets are private to the team that crawls them (issue 48 item 4): a token sees the
// targets of the cooldowns its own reports started or extended, and the target it asks about
// (it named it itself); of every other cooldown only that the proxy is cooling down for some
// site, and until when. Who reported a cooldown is the book's (ProxyCooldown.reporters), so
// every replica of a shared book answers a team alike; the replica's own record of its
// reports (`reportedHere`) covers a team the book no longer names (it keeps three). Pure, so
// the rule is table-tested.
import type { ProxyCooldown } from '../book/lease-store.js';

/**
 * The cooldowns as `owner` may see them: another team's target becomes `{hidden: true}` (no
 * target), the global pool's (no target) stays as it is. Reporters are never passed on.
 */
export function visibleCooldowns(
  cooldowns: readonly ProxyCooldown[],
  owner: string,
  asked?: string,
  reportedHere: (target: string) => boolean = () => false,
): ProxyCooldown[] {
  return cooldowns.map(({ reporters, ...c }) =>
    c.target === undefined ||
    c.target === asked ||
    reporters?.includes(owner) === true ||
    reportedHere(c.target)
      ? c
      : { until: c.until, hidden: true },
  );
}

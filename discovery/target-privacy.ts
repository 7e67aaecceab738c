// Targets are private to the team that crawls them (issue 48 item 4): a token sees the
// targets of the cooldowns its own reports started or extended, and the target it asks about
// (it named it itself); of every other cooldown only that the proxy is cooling down for some
// site, and until when. Pure, so the rule is table-tested.
import type { ProxyCooldown } from '../book/lease-store.js';

/**
 * The cooldowns as `ownTarget` lets one token see them: another team's target becomes
 * `{hidden: true}` (no target), the global pool's (no target) stays as it is.
 */
export function visibleCooldowns(
  cooldowns: readonly ProxyCooldown[],
  ownTarget: (target: string) => boolean,
  asked?: string,
): ProxyCooldown[] {
  return cooldowns.map((c) =>
    c.target === undefined || c.target === asked || ownTarget(c.target)
      ? c
      : { until: c.until, hidden: true },
  );
}

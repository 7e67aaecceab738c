// What one proxy's pace for a site tells the site's other proxies. Sites limit every source
// alike, so a limit one proxy learned (by a 429, or shown by its successes or a probe) holds
// for all: a new proxy starts at it, a proxy below what the site has shown is raised to it,
// and one probe answers for all of them. Pure; site-paces.ts keeps the state.
import { impliedLimit } from './implied-limit.js';
import { capacityOf, PROBE_AFTER_PERIODS, unpaced, type Pace } from './site-pace.js';

/**
 * A proxy's first pace for a site that another proxy has learned already: a site limits every
 * source alike, so the limit, period and headroom carry over, and the proxy starts paced
 * instead of learning the limit by a 429 of its own (each costs a rest of a whole period).
 * Its bucket holds what its own requests left, replayed through the learned bucket from a
 * full one (replayTokens): those sent, not only those answered (the requests in flight when
 * the pace arrives spent a token each; counting only the successes sent one request too many
 * per request in flight, and each got a 429 and a rest), each refilled from when it went, not
 * from now (a crawl's first burst goes a few hundred ms before the first 429 teaches the pace;
 * counting it as spent now held every proxy back that long). A proxy with a pace of its own
 * keeps it.
 */
export function adopt(mine: Pace, learned: Pace, now: number): Pace {
  if (mine.limit !== undefined || learned.limit === undefined) return mine;
  const capacity = capacityOf(learned);
  const refill = learned.limit / learned.periodMs;
  const tokens = Math.min(
    replayTokens(mine.recent.toArray(), capacity, refill, now),
    replayTokens(mine.sent.toArray(), capacity, refill, now),
  );
  return {
    ...unpaced,
    limit: learned.limit,
    periodMs: learned.periodMs,
    headroom: learned.headroom,
    tokens,
    at: now,
    // The quiet before its first probe starts now, as after a 429 of its own, and is the base
    // one: the learned pace may be minutes old, and its quiet (up to MAX_PROBE_AFTER_PERIODS)
    // kept new proxies from probing for minutes after the limit rose. On a limit that holds it
    // costs a refused probe per new proxy at most (another proxy's probe defers it).
    limitedAt: now,
    probeAfterPeriods: PROBE_AFTER_PERIODS,
    recent: mine.recent,
    blind: learned.blind,
    ceiling: learned.ceiling,
  };
}

/**
 * The tokens a bucket of `capacity`, refilled `refill` per ms, holds at `now` after a request
 * at each of `times` (ascending), starting full: within [0, capacity]. A request the bucket
 * had no token for still spent one at the site (it went unpaced), so the replay goes below
 * zero between requests and only the result is clamped.
 */
export function replayTokens(
  times: readonly number[],
  capacity: number,
  refill: number,
  now: number,
): number {
  let tokens = capacity;
  let at = times[0] ?? now;
  for (const t of times) {
    tokens = Math.min(capacity, tokens + (t - at) * refill) - 1;
    at = t;
  }
  return Math.max(0, Math.min(capacity, tokens + (now - at) * refill));
}

/**
 * The limit the site has shown it allows every source, after a 429 through one proxy (its
 * pace `before` the 429 and `after` it), given what other proxies showed so far (`proven`, 0
 * for nothing). Sites limit every source alike, so the best evidence any proxy has holds for
 * all (see raiseTo):
 * - the successes of the last period before the 429 (impliedLimit): what the site let through;
 * - a refused probe: the limit before it held for the quiet periods before the probe.
 * A 429 that lowered the limit otherwise says the site allows less than before: that limit,
 * whatever was shown earlier.
 * Why: a proxy's first limit is the least its own successes prove, and a proxy whose first
 * requests went far apart learns less than the site allows (two a second for a site allowing
 * three). Learned alone, each such proxy stayed low for the whole crawl: a probe raises only
 * the proxy that sends it, and a probe of any proxy defers everyone's next one.
 */
export function provenAfter429(proven: number, before: Pace, after: Pace, now: number): number {
  if (after.limit === undefined) return proven;
  // A blind 429 shows no limit the site allows; it only says the floor shown may be too high.
  if (after.blind) return proven === 0 ? 0 : Math.min(proven, after.ceiling);
  const probeRefused = before.limit !== undefined && now - before.probedAt < before.periodMs;
  if (before.limit !== undefined && after.limit < before.limit && !probeRefused) return after.limit;
  const lastPeriod = before.recent.toArray().filter((t) => t > now - after.periodMs);
  const shown = lastPeriod.length === 0 ? 0 : impliedLimit(lastPeriod, after.periodMs);
  return Math.max(proven, shown, probeRefused ? after.limit : 0);
}

/**
 * A probe goes out only after the limit held for `probeAfterPeriods` periods without a 429:
 * the limit before the probe (`probing` is the pace admit returned with it) is shown.
 */
export function provenByProbe(proven: number, probing: Pace): number {
  if (probing.limit === undefined) return proven;
  // A blind probe goes from the ceiling, which held for the quiet periods before it.
  return Math.max(proven, probing.blind ? probing.ceiling : probing.limit - 1);
}

/**
 * A proxy whose limit is below what the site has shown it allows every source (`proven`)
 * takes that limit; its bucket, headroom, rest and quiet stay. An unpaced proxy stays unpaced.
 */
export function raiseTo(pace: Pace, proven: number): Pace {
  if (pace.limit === undefined || pace.limit >= proven) return pace;
  return { ...pace, limit: proven, ceiling: Math.max(pace.ceiling, proven) };
}

/**
 * Another proxy of the site probed it at `probedAt`, and its quiet between probes is now
 * `probeAfterPeriods` (doubled if the site refused): sites limit every source alike, so one
 * probe answers for all of them, and the others wait as if it had been theirs. Twenty proxies
 * probing on their own meant twenty 429s, each a rest, for one answer.
 */
export function heardOfProbe(pace: Pace, probedAt: number, probeAfterPeriods: number): Pace {
  if (pace.limit === undefined) return pace;
  return {
    ...pace,
    probedAt: Math.max(pace.probedAt, probedAt),
    probeAfterPeriods: Math.max(pace.probeAfterPeriods, probeAfterPeriods),
  };
}

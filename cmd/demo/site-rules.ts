// The strict demo site's decision (`npm run demo -- --site`): what a real site does to a
// crawler, small enough to read. Pure, so the rules are a table test.

export interface SiteRules {
  /** Exit addresses answered 403 (the banned proxy's). */
  banned: ReadonlySet<string>;
  /** Requests per second per source address; more in the last second answer 429. */
  ratePerSecond: number;
}

export type SiteAnswer =
  { kind: 'ok' } | { kind: 'banned' } | { kind: 'rate_limited'; retryAfterSeconds: number };

/** Request times (ms) per source address within the last second. */
export type SiteHistory = Map<string, number[]>;

const WINDOW_MS = 1000;

/** '::ffff:127.0.0.2' → '127.0.0.2': an IPv4 caller as a dual-stack socket shows it. */
export function sourceAddress(remote: string | undefined): string {
  return (remote ?? '').replace(/^::ffff:/, '');
}

/**
 * The answer to one request from `source` at `now`; records it in `history` (a banned
 * request is not counted: it never reached the rate limiter). Refused requests count, as on
 * a real site: hammering through a 429 keeps it closed.
 */
export function siteAnswer(rules: SiteRules, history: SiteHistory, source: string, now: number): SiteAnswer {
  if (rules.banned.has(source)) return { kind: 'banned' };
  const recent = (history.get(source) ?? []).filter((t) => t > now - WINDOW_MS);
  recent.push(now);
  history.set(source, recent);
  if (recent.length <= rules.ratePerSecond) return { kind: 'ok' };
  // The window frees up when its oldest request is a second old; Retry-After is whole seconds.
  return {
    kind: 'rate_limited',
    retryAfterSeconds: Math.max(1, Math.ceil((recent[0] + WINDOW_MS - now) / 1000)),
  };
}

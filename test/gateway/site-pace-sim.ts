// Simulated sites and clients for the site pace's tables (site-pace.unit.test.ts): a discrete
// event loop on a virtual clock, so a minute of crawling runs in milliseconds and the same
// seed gives the same run. Each client sends a request at its turn (reserve), the site answers
// on arrival (a small seeded travel time, as through a proxy), and the answer teaches the pace.
import { rateLimited, reserve, succeeded, UNPACED, type Pace } from '../../gateway/site-pace.js';

export type Shape = 'bucket' | 'sliding' | 'fixed';

/**
 * A site limiting one source to `limit` requests a second, counted by `shape`; a function of the
 * time gives a limit that changes mid-run (Infinity: no limit).
 */
export interface SimSite {
  /** 200 or 429 for a request arriving at `t` (ms). */
  answer(t: number): 200 | 429;
  /** Retry-After of its 429s in ms, or undefined for none. */
  retryAfterMs: number | undefined;
}

export function simSite(
  shape: Shape,
  limitOf: number | ((t: number) => number),
  retryAfterMs: number | undefined,
): SimSite {
  const limitAt = typeof limitOf === 'number' ? () => limitOf : limitOf;
  let limit = limitAt(0);
  let tokens = limit;
  let at = 0;
  const answered: number[] = [];
  let window = -1;
  let inWindow = 0;
  const allow: Record<Shape, (t: number) => boolean> = {
    // One second's worth, refilled continuously (the bench's site).
    bucket: (t) => {
      tokens = Math.min(limit, tokens + (Math.max(0, t - at) * limit) / 1000);
      at = Math.max(at, t);
      if (tokens < 1) return false;
      tokens--;
      return true;
    },
    // At most `limit` answered in the last second (a 429 does not count: the bench's site).
    sliding: (t) => {
      while (answered.length > 0 && answered[0]! <= t - 1000) answered.shift();
      if (answered.length >= limit) return false;
      answered.push(t);
      return true;
    },
    // At most `limit` per calendar second.
    fixed: (t) => {
      const w = Math.floor(t / 1000);
      if (w !== window) [window, inWindow] = [w, 0];
      if (inWindow >= limit) return false;
      inWindow++;
      return true;
    },
  };
  return {
    answer: (t) => {
      limit = limitAt(t);
      if (limit === Infinity) return 200;
      tokens = Math.min(tokens, limit);
      return allow[shape](t) ? 200 : 429;
    },
    retryAfterMs,
  };
}

export interface SimOptions {
  seconds: number;
  /** Requests in flight or waiting at once (the crawler's concurrency). */
  clients: number;
  /** Each client's pause after an answer (ms): 0 = demand always exceeds the pace. */
  thinkMs?: number;
  /** Travel each way is travelMs plus up to jitterMs, seeded. */
  travelMs?: number;
  jitterMs?: number;
  seed?: number;
  /** Extra 429s the site answers at these times (a hiccup), whatever its limit. */
  hiccupsAt?: number[];
  /** The pace the run starts from (UNPACED unless given: e.g. one adopted from another upstream). */
  start?: Pace;
  trace?: (now: number, what: string, pace: Pace) => void;
}

export interface SimResult {
  /** Times (ms) of the 200s, as the client got them. */
  oks: number[];
  /** Times of the 429s. */
  limited: number[];
  pace: Pace;
}

type Client =
  | { kind: 'turn'; at: number; epoch: number }
  | { kind: 'flight'; sentAt: number; doneAt: number; status: 200 | 429 }
  | { kind: 'think'; until: number };

/** Runs clients through one pace against `site` for `seconds` of virtual time. */
export function simulate(site: SimSite, o: SimOptions): SimResult {
  const end = o.seconds * 1000;
  let seed = o.seed ?? 1;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const travel = () => (o.travelMs ?? 5) + random() * (o.jitterMs ?? 5);
  const hiccups = [...(o.hiccupsAt ?? [])];
  let pace: Pace = o.start ?? UNPACED;
  const result: SimResult = { oks: [], limited: [], pace };
  const take = (now: number): Client => {
    const turn = reserve(pace, now);
    pace = turn.pace;
    return { kind: 'turn', at: turn.at, epoch: pace.limitedAt };
  };
  const clients: Client[] = [];
  for (let i = 0; i < o.clients; i++) clients.push(take(0));
  for (;;) {
    let next = 0;
    let when = Infinity;
    clients.forEach((c, i) => {
      const t = c.kind === 'turn' ? c.at : c.kind === 'flight' ? c.doneAt : c.until;
      if (t < when) [next, when] = [i, t];
    });
    if (when > end) break;
    const now = when;
    const c = clients[next]!;
    o.trace?.(now, c.kind === 'flight' ? `answer ${c.status} sent ${c.sentAt.toFixed(0)}` : c.kind, pace);
    if (c.kind === 'think') clients[next] = take(now);
    else if (c.kind === 'turn') {
      // A 429 since the reservation voids it (site-paces.ts does the same).
      if (c.epoch !== pace.limitedAt) {
        clients[next] = take(now);
        continue;
      }
      const arrive = now + travel();
      let status = site.answer(arrive);
      if (hiccups.length > 0 && hiccups[0]! <= arrive) {
        hiccups.shift();
        status = 429;
      }
      clients[next] = { kind: 'flight', sentAt: now, doneAt: arrive + travel(), status };
    } else {
      if (c.status === 429) {
        result.limited.push(now);
        pace = rateLimited(pace, now, c.sentAt, site.retryAfterMs).pace;
      } else {
        result.oks.push(now);
        pace = succeeded(pace, now, c.sentAt);
      }
      clients[next] = (o.thinkMs ?? 0) > 0 ? { kind: 'think', until: now + o.thinkMs! } : take(now);
    }
  }
  result.pace = pace;
  return result;
}

/** Events of `times` within [fromMs, toMs), per second. */
export function perSecond(times: number[], fromMs: number, toMs: number): number {
  return (times.filter((t) => t >= fromMs && t < toMs).length * 1000) / (toMs - fromMs);
}

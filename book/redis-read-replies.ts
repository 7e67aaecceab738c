// The read scripts' replies (usage, standing, totals) as the store answers them: decoded on
// the book's clock, whose time comes back with the data (decision 0024), never with this
// replica's clock.

import { agreed, runningReporters } from './ban-agreement.js';
import type { HoldReason, ProxyCooldown, ProxyStanding, ProxyUsage, StoreTotals } from './lease-store.js';
import { WINDOW_BUCKETS } from './outcome-window.js';
import { oldestBucket, windowCounts } from './redis-book-codec.js';

/** Separates a reporters field's target from the reporter (targets never hold it). */
const NUL = '\u0000';

/** The statistics window a store's usage is read with. */
export interface StatsWindow {
  statsWindowSeconds: number;
  bucketMillis: number;
}

/** A proxy's usage from a reply's load, hold reason ('' = none) and raw statistics slots. */
export function usageFrom(
  window: StatsWindow,
  load: unknown,
  hold: unknown,
  slots: unknown,
  now: number,
): ProxyUsage {
  const held = hold === '' ? undefined : (String(hold) as HoldReason);
  return {
    activeLeases: Number(load),
    stats: {
      windowSeconds: window.statsWindowSeconds,
      ...windowCounts(slots as string[], oldestBucket(now, window.bucketMillis, WINDOW_BUCKETS)),
    },
    ...(held === undefined ? {} : { held }),
  };
}

/**
 * The usage script's reply for these proxies; addressOf: each one's current address in this
 * replica's catalog ('' = not there); each load is handed to learn as it is read.
 */
export function usagesFrom(
  window: StatsWindow,
  proxyIDs: readonly string[],
  reply: unknown,
  addressOf: (proxyID: string) => string,
  learn: (proxyID: string, load: number) => void,
): ProxyUsage[] {
  const [now, loads, holds, slots] = reply as [number, number[], string[], string[][]];
  const oldest = oldestBucket(now, window.bucketMillis, WINDOW_BUCKETS);
  return proxyIDs.map((id, i) => {
    const activeLeases = Number(loads[i]);
    const held = holdReason(holds[i] || null, addressOf(id), now);
    learn(id, activeLeases);
    return {
      activeLeases,
      stats: { windowSeconds: window.statsWindowSeconds, ...windowCounts(slots[i], oldest) },
      ...(held === undefined ? {} : { held }),
    };
  });
}

/**
 * The standing script's reply: the usage keys and the proxy's running cooldowns (P:tord)
 * and who reported them (P:rep), with the time they were read at; address: the proxy's
 * current one ('' = not in the catalog).
 */
export function standingFrom(window: StatsWindow, reply: unknown, address: string): ProxyStanding {
  const [rawNow, load, hold, slots, flat, rep] = reply as [
    number,
    number,
    string,
    string[],
    string[],
    string[],
  ];
  const now = Number(rawNow);
  const activeLeases = Number(load);
  const held = holdReason(hold || null, address, now);
  const oldest = oldestBucket(now, window.bucketMillis, WINDOW_BUCKETS);
  const reporters = new Map<string, Map<string, number>>();
  for (let j = 0; j + 1 < rep.length; j += 2) {
    const [field, end] = [rep[j], rep[j + 1]];
    const at = field.lastIndexOf(NUL);
    const target = field.slice(0, at);
    let names = reporters.get(target);
    if (names === undefined) reporters.set(target, (names = new Map()));
    names.set(field.slice(at + 1), Number(end));
  }
  const cooldowns: ProxyCooldown[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const until = Number(flat[i + 1]);
    const names = reporters.get(flat[i]) ?? new Map<string, number>();
    const seen = { until, agreed: agreed(names, now), ...runningReporters(names, now) };
    // The global pool's key is the empty target (no target is empty: request-parsing.ts).
    cooldowns.push(flat[i] === '' ? seen : { target: flat[i], ...seen });
  }
  const usage: ProxyUsage = {
    activeLeases,
    stats: { windowSeconds: window.statsWindowSeconds, ...windowCounts(slots, oldest) },
    ...(held === undefined ? {} : { held }),
  };
  return { usage, cooldowns, now };
}

/** The totals script's reply: NOW and seven figures, then the proxies that may have live leases. */
export function totalsFrom(
  reply: unknown[],
): [now: number, figures: Omit<StoreTotals, 'activeLeases'>, busy: string[]] {
  const t = reply.slice(0, 8).map(Number);
  return [
    t[0],
    {
      activeSessions: t[1],
      activeCooldowns: t[2],
      sessionsEvicted: t[3],
      cooldownsEvicted: t[4],
      suspectProxies: t[5],
      suspicionsRaised: t[6],
      suspicionsExpired: t[7],
    },
    reply[8] as string[],
  ];
}

/** A stored hold (P:hold's JSON) as it stands for the proxy at this address now. */
export function holdReason(raw: string | null, address: string, now: number): HoldReason | undefined {
  if (raw === null) return undefined;
  const hold = JSON.parse(raw) as { sa?: string; su?: number; da?: string };
  if (hold.sa === address && (hold.su ?? 0) > now) return 'suspect';
  if (hold.da === address) return 'down';
  return undefined;
}

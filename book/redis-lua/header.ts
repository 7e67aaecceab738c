// The constants every script of a store starts with: its key prefix and settings as Lua locals.

import { REQUEST_RETENTION_MILLIS } from '../lease-store.js';

/** Everything a store's scripts take as constants. */
export interface ScriptSettings {
  /** The hash-tagged key prefix, e.g. "{proxy-operator}". */
  prefix: string;
  windowMillis: number;
  bucketMillis: number;
  idleMillis: number;
  maxSessions: number;
  banBaseMillis: number;
  banMaxMillis: number;
  rateLimitBaseMillis: number;
  rateLimitMaxMillis: number;
  singleCooldownWindow: boolean;
  suspicionMillis: number;
  holdoffMillis: number;
  maxTargetsPerProxy: number;
  maxTargetEntries: number;
  jitter: number;
  /** Ring slots of the statistics window (outcome-window.ts's WINDOW_BUCKETS). */
  buckets: number;
  /**
   * Whether every call's first argument is a test's clock (ms). Without one the scripts read
   * Redis's TIME and take no clock argument: one argument fewer on every call.
   */
  clockArgument: boolean;
}

/**
 * How far a proxy's m (its keys' life, redis-scripts' P:ld) runs past the latest expiry
 * among its leases, so that it moves once per this time instead of with every lease.
 */
export const LOAD_SLACK_MILLIS = 60_000;

export function header(s: ScriptSettings): string {
  // Book state outlives its last write (real time) past the longest time it matters.
  const retain =
    Math.max(s.banMaxMillis * 2 + s.windowMillis, s.idleMillis, s.suspicionMillis, s.holdoffMillis) + 60_000;
  const P = s.prefix;
  return [
    `local P = '${P}'`,
    // Where the arguments start: after a test's clock, when the store has one.
    `local A = ${s.clockArgument ? 1 : 0}`,
    `local CLOCK_ARGUMENT = ${s.clockArgument ? 'true' : 'false'}`,
    `local WINDOW = ${lua(s.windowMillis)}`,
    `local BUCKET = ${lua(s.bucketMillis)}`,
    `local BUCKETS = ${lua(s.buckets)}`,
    `local IDLE = ${lua(s.idleMillis)}`,
    `local MAX_SESSIONS = ${lua(s.maxSessions)}`,
    `local BAN_BASE = ${lua(s.banBaseMillis)}`,
    `local BAN_MAX = ${lua(s.banMaxMillis)}`,
    `local RL_BASE = ${lua(s.rateLimitBaseMillis)}`,
    `local RL_MAX = ${lua(s.rateLimitMaxMillis)}`,
    `local SINGLE = ${s.singleCooldownWindow ? 'true' : 'false'}`,
    `local SUSPICION = ${lua(s.suspicionMillis)}`,
    `local HOLDOFF = ${lua(s.holdoffMillis)}`,
    `local MAX_TPP = ${lua(s.maxTargetsPerProxy)}`,
    `local MAX_TE = ${lua(s.maxTargetEntries)}`,
    `local JITTER = ${lua(s.jitter)}`,
    `local RETAIN = ${lua(retain)}`,
    `local REQ_RETAIN = ${lua(REQUEST_RETENTION_MILLIS)}`,
    `local K_COUNTERS = '${P}:counters'`,
    // P:ld's flag bits (the layout above).
    'local HOLD, COOL, STATS = 1, 2, 4',
    `local K_BUSY = '${P}:busy'`,
    `local SLACK = ${lua(LOAD_SLACK_MILLIS)}`,
    `local K_SESS = '${P}:sessions'`,
    `local K_SESS_USED = '${P}:sessions-used'`,
    `local K_TARGETS = '${P}:targets'`,
    `local K_SUSPECTS = '${P}:suspects'`,
    `local CHANNEL = '${P}:probe-requests'`,
    // The fleet registry and its counts (redis-scripts.ts's layout; fleet-fingerprint.ts).
    `local K_FLEET, K_FLEET_SUM = '${P}:fleet', '${P}:fleet-sum'`,
    `local K_FULL, K_HELD = '${P}:full', '${P}:held'`,
    // Per class (proxy-classes.ts): P:class-sum, and P:cfull:<c>, P:cheld:<c>, P:ccdt:<c>:<target>.
    `local K_CLASS_SUM = '${P}:class-sum'`,
    // By exit IP (exit-ip-match.ts's exitKey; members "key:id", lex order): the registry's
    // members with an exit, and those marked in P:full and P:cdt:<target> (P:xcd:<target>).
    `local K_XIP, K_XFULL = '${P}:xip', '${P}:xfull'`,
    // The same by class, then exit (members "class:key:id", lex order): a block's members in
    // a class, counted (P:cxip, P:cxfull, P:cxcd:<target>).
    `local K_CXIP, K_CXFULL = '${P}:cxip', '${P}:cxfull'`,
  ].join('\n');
}

/** A number as a Lua literal (settings are validated finite numbers). */
function lua(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return String(n);
}

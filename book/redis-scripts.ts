// The Redis lease book's Lua scripts. Each operation of RedisLeaseStore is one of these, run
// with EVALSHA: atomic (nothing else runs on the server meanwhile) and one round trip.
//
// A store builds its own scripts (buildScripts): its key prefix and settings are constants in
// the source, and each script carries only the helpers it calls. Why: Redis runs a script's
// whole chunk on every call, so a shared prelude that parsed fifteen settings from ARGV and
// defined thirty helpers cost ~16 µs per call before the first command, more than the
// commands of a release (docs/benchmarks.md, issue 21). Two stores with different settings
// have different scripts (and SHAs); each runs its own rules, as before.
//
// This module assembles them; the parts live in redis-lua/: the header of constants
// (header.ts), the helper blocks by family (*-blocks.ts) and the script bodies with what they
// need, one module per operation family (*-script(s).ts).
//
// Keys (P is the hash-tagged prefix, e.g. "{proxy-operator}", so every key of a book is in
// one Cluster slot; KEYS[1] is P..':counters', which routes the call, and the scripts derive
// the other keys from P):
//   P:lease:<id>        string: proxy \0 addr \0 ttl \0 at \0 exp \0 target \0 sel \0 rec \0 session
//                       (session last: the one field that may hold any byte), PX = its life;
//                       addr is empty when the acquire was sent no address (readers take it
//                       from rec: addr_of)
//   P:load:<proxy>      zset leaseID -> expiry (ms): the proxy's leases, live or ended-not-pruned
//   P:ld:<proxy>        string "Fn e m": F a flag letter ('a' + bits: see below), then n =
//                       members of P:load:<proxy> but its sentinel, e <= the earliest and
//                       m >= the latest expiry among them. While n is 0 or e > now every
//                       member is live, so n is the load and one MGET reads a whole chunk's
//                       loads; otherwise that zset is pruned first. Both keys live until
//                       m + 60 s (PX from m: no TTL to read back); m runs SLACK ahead of the
//                       latest expiry, so it (and those lives) move once per SLACK, not on
//                       every lease. The zset holds a sentinel ('' at -inf) so it never
//                       empties: P:ld stays at 0 after the last release, and the next lease
//                       there is two writes, not five.
//                       Per-proxy strings, not one hash: a hash of up to 512 fields is a
//                       listpack, and every HMGET field a linear scan of it.
//                       The flags say what else an acquire must read for the proxy: HOLD (1)
//                       P:hold may exist, COOL (2) P:cd entries may exist, STATS (4)
//                       P:stats may exist. While P:ld exists a clear bit means there is none:
//                       whatever writes one sets its bit first (flag), an acquire that makes
//                       P:ld reads all three, and a bit is cleared only when its state is
//                       gone. Most proxies have none, and their acquire reads one key each
//                       instead of three (~11 µs less per acquire; docs/benchmarks.md).
//   P:busy              zset proxyID -> its m: the proxies that may have live leases (totals
//                       counts theirs); written when m moves, pruned by totals and the sweep
//   P:sessions          hash session -> proxyID;  P:sessions-used  zset session -> last use
//   P:stats:<proxy>     hash slot -> "bucket ok banned rate_limited unreachable"
//   P:tgt:<proxy>       hash target -> "u s ru rs|b,ok,ba,rl,un;..." (cooldowns, streaks, window)
//   P:tord:<proxy>      zset target -> cooldown end: the proxy's targets, for its cap
//   P:targets           zset proxy\0target -> cooldown end: every entry (cap, active count)
//   P:cd:<proxy>\0<target>  string: that entry's cooldown end again (its score), for the
//                       acquire's MGET; written and deleted with the member, PX = RETAIN
//   P:egress:<proxy>    string "exit <ip>" | "ip <ip>": the proxy's egress as the book last
//                       heard of it (egress.ts); PX = RETAIN, kept alive by bad reports, so
//                       it lasts while the proxy has cooldowns to forget
//   P:hold:<proxy>      string JSON {sa, ss, su, da, ca, ct}: suspect/down holds (read in the
//                       acquire's second MGET when the flags say so), PX = the book's retention
//   P:suspects          zset proxyID -> suspicion deadline
//   P:counters          hash of monotonic counters
//   P:fleet             hash proxyID -> "cap h1 h2 c": the leasable proxies as the replicas'
//                       catalogs show them, c its class (proxy-classes.ts, as classID: 16 hex
//                       digits; the fleet script); P:fleet-sum  hash n, a, b: its count and XOR
//                       sums of h1 and h2 (fleet-fingerprint.ts). While a replica's own
//                       figures equal these, the counts below are over its candidates, and a
//                       refusal of a request without selector, exit IP or scope is
//                       known without sending them (the acquire's 'whole')
//   P:class-sum         hash c -> "n a b": each class's count and XOR sums, as P:fleet-sum is
//                       the registry's: a request with a selector or a scope sends those of
//                       the classes it matches, and its refusal is counted over them
//   P:full              zset proxyID -> until when it is certainly full: a registry proxy
//                       whose grant reached its registry cap, at the earliest expiry among
//                       its leases; a release, a raised cap or leaving the registry ends it
//   P:held              zset proxyID -> until when a hold may keep it out (registry proxies)
//   P:cdt:<target>      zset proxyID -> cooldown end: registry proxies cooling for the target
//                       (written and deleted with P:targets' member while in the registry)
//   P:cfull:<c>, P:cheld:<c>, P:ccdt:<c>:<target>  the three above, of class c's members:
//                       written beside them with the class P:fleet gives; a member that
//                       changes class takes its marks along (the fleet script). A live mark
//                       of a class is always one of the registry's too (its score is the
//                       same), so a removal from a class's set follows the registry's
//   P:xip, P:xfull, P:xcd:<target>  zsets of "exitKey:proxyID" (exit-ip-match.ts, all
//                       scores 0, lex order): the registry's members with an exit, and those
//                       of them in P:full and in P:cdt:<target> (any score: an ended mark
//                       is taken out of both by the next refusal by exit IP, or the sweep),
//                       so a refusal by exit-IP block counts its members, full and cooling
//                       ones with ZLEXCOUNT over the block's range
//   P:cxip, P:cxfull, P:cxcd:<target>  the three above per class: "c:exitKey:proxyID", written
//                       beside them for members with a class and an exit, moved by the fleet
//                       script with a class or an exit; a block with a selector or a scope
//                       counts its matched classes' members, full and cooling ones, over each
//                       class's range of the block (its count of members checked first)
//   P:req:<key>         string: a write's first answer by its request key (request-outcomes.ts:
//                       kind:owner.requestID:leaseID), PX = REQ_RETAIN; a repeat answers it
// Times are milliseconds since the epoch from Redis's TIME (one clock for every replica), or
// from ARGV[1] when a test drives the clock. Keys carry a real-time TTL as garbage collection
// only; every decision compares stored times with that clock.
//
// Replies carry raw statistics slots (HVALS of P:stats:<proxy>); the replica sums them
// (windowCounts): arithmetic that scales out with the replicas instead of running in Redis.

import { COMMON_BLOCKS } from './redis-lua/common-blocks.js';
import { COOLDOWN_BLOCKS } from './redis-lua/cooldown-blocks.js';
import { HOLD_BLOCKS } from './redis-lua/hold-blocks.js';
import { SESSION_BLOCKS } from './redis-lua/session-blocks.js';
import { LEASE_BLOCKS } from './redis-lua/lease-blocks.js';
import { REPORT_BLOCKS } from './redis-lua/report-blocks.js';
import { ACQUIRE_BODIES } from './redis-lua/acquire-script.js';
import { LEASE_BODIES } from './redis-lua/lease-scripts.js';
import { REPORT_BODIES } from './redis-lua/report-scripts.js';
import { HOLD_BODIES } from './redis-lua/hold-scripts.js';
import { READ_BODIES } from './redis-lua/read-scripts.js';
import { FLEET_BODIES } from './redis-lua/fleet-script.js';
import { TOKEN_BODIES } from './redis-lua/token-scripts.js';
import { header, type ScriptSettings } from './redis-lua/header.js';
import type { Block, BlockName, Body, Lazy, LuaScript, ScriptName } from './redis-lua/script-parts.js';

export { LOAD_SLACK_MILLIS, type ScriptSettings } from './redis-lua/header.js';
export type { LuaScript, ScriptName } from './redis-lua/script-parts.js';

// In definition order: a block only calls blocks above it.
const BLOCKS: Record<BlockName, Block> = {
  ...COMMON_BLOCKS,
  ...COOLDOWN_BLOCKS,
  ...HOLD_BLOCKS,
  ...SESSION_BLOCKS,
  ...LEASE_BLOCKS,
  ...REPORT_BLOCKS,
};

/** The blocks a script needs, with everything they call, in definition order. */
export function blocksFor(needs: readonly string[]): string[] {
  const wanted = new Set<string>();
  const visit = (name: string): void => {
    if (wanted.has(name)) return;
    const block = BLOCKS[name as BlockName] as Block | undefined;
    if (block === undefined) throw new Error(`unknown script block ${name}`);
    wanted.add(name);
    block.needs.forEach(visit);
  };
  needs.forEach(visit);
  return Object.keys(BLOCKS).filter((name) => wanted.has(name));
}

// In the order they always had (their names are the keys of a store's scripts).
const BODIES: Record<ScriptName, Body> = {
  acquire: ACQUIRE_BODIES.acquire,
  renew: LEASE_BODIES.renew,
  release: LEASE_BODIES.release,
  report: REPORT_BODIES.report,
  observe: HOLD_BODIES.observe,
  egress: REPORT_BODIES.egress,
  get: LEASE_BODIES.get,
  endSession: LEASE_BODIES.endSession,
  totals: READ_BODIES.totals,
  sweep: READ_BODIES.sweep,
  usage: READ_BODIES.usage,
  standing: READ_BODIES.standing,
  suspects: HOLD_BODIES.suspects,
  refusal: REPORT_BODIES.refusal,
  fleet: FLEET_BODIES.fleet,
  fleetRead: FLEET_BODIES.fleetRead,
  failedAuth: TOKEN_BODIES.failedAuth,
};

/** A lazy group as Lua: its exports as locals, and the loader that defines and returns them. */
function lazyLoader(group: Lazy, eager: ReadonlySet<string>): string {
  const blocks = blocksFor(group.needs).filter((block) => !eager.has(block));
  const names = group.exports.join(', ');
  return [
    `local ${names}`,
    `local function ${group.loader}()`,
    ...blocks.map((block) => BLOCKS[block as BlockName].lua),
    `return ${names}`,
    'end',
  ].join('\n');
}

/** The scripts of a store with these settings. */
export function buildScripts(settings: ScriptSettings): Record<ScriptName, LuaScript> {
  const head = header(settings);
  const out = {} as Record<ScriptName, LuaScript>;
  for (const [name, { needs, lazy, body }] of Object.entries(BODIES) as [ScriptName, Body][]) {
    const eager = blocksFor(needs);
    const helpers = eager.map((block) => BLOCKS[block as BlockName].lua);
    const loaders = (lazy ?? []).map((group) => lazyLoader(group, new Set(eager)));
    out[name] = { name, source: [head, ...helpers, ...loaders, body].join('\n') };
  }
  return out;
}

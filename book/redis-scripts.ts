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
//   P:req:<key>         string: a write's first answer by its request key (request-outcomes.ts:
//                       kind:owner.requestID:leaseID), PX = REQ_RETAIN; a repeat answers it
// Times are milliseconds since the epoch from Redis's TIME (one clock for every replica), or
// from ARGV[1] when a test drives the clock. Keys carry a real-time TTL as garbage collection
// only; every decision compares stored times with that clock.
//
// Replies carry raw statistics slots (HVALS of P:stats:<proxy>); the replica sums them
// (windowCounts): arithmetic that scales out with the replicas instead of running in Redis.

import { REQUEST_RETENTION_MILLIS } from './lease-store.js';

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

export interface LuaScript {
  readonly name: string;
  readonly source: string;
}

export type ScriptName =
  | 'acquire'
  | 'renew'
  | 'release'
  | 'report'
  | 'observe'
  | 'egress'
  | 'get'
  | 'endSession'
  | 'totals'
  | 'sweep'
  | 'usage'
  | 'standing'
  | 'suspects'
  | 'refusal';

/** A helper block: Lua text and the blocks it calls (defined before it). */
interface Block {
  needs: readonly BlockName[];
  lua: string;
}

type BlockName =
  | 'now'
  | 'int'
  | 'keep'
  | 'count'
  | 'flags'
  | 'oldest'
  | 'statsRaw'
  | 'statsAdd'
  | 'entries'
  | 'targets'
  | 'held'
  | 'holds'
  | 'suspicions'
  | 'sessions'
  | 'leases'
  | 'loads'
  | 'requests'
  | 'releaseOne'
  | 'reportOne';

// In definition order: a block only calls blocks above it.
const BLOCKS: Record<BlockName, Block> = {
  now: {
    needs: [],
    lua: String.raw`
-- NOW: ms since the epoch, from TIME's two strings by arithmetic (two string-to-number
-- conversions), or a test's clock in ARGV[1] (then A = 1: every other argument is one further).
-- NOW_S is that clock's string as it came (nil with TIME: int(NOW) where a script writes it).
local NOW, NOW_S
if CLOCK_ARGUMENT then
  NOW_S = ARGV[1]
  NOW = tonumber(NOW_S)
else
  local t = redis.call('TIME')
  NOW = t[1] * 1000 + math.floor(t[2] / 1000)
end
`,
  },
  int: {
    needs: [],
    lua: String.raw`
-- An integer as a string: "%d" is ~5x cheaper than the "%.14g" of a plain concatenation
-- (~2 µs per 13-digit number here; docs/benchmarks.md, issue 21's third round).
local function int(x) return string.format('%d', x) end`,
  },
  keep: {
    needs: [],
    lua: String.raw`
-- Extends a key's life to at least ms from now, never shortening it: one call when that
-- moves its expiry later (GT), a second to tell "already later" from "no TTL yet".
local function keep(key, ms)
  ms = math.ceil(ms)
  if redis.call('PEXPIRE', key, ms, 'GT') == 0 and redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, ms)
  end
end`,
  },
  count: {
    needs: [],
    lua: String.raw`
local function count(name, n)
  redis.call('HINCRBY', K_COUNTERS, name, n or 1)
  redis.call('PEXPIRE', K_COUNTERS, 30 * 24 * 3600 * 1000)
end`,
  },
  flags: {
    needs: [],
    lua: String.raw`
-- Sets (on) or clears a flag bit in a proxy's P:ld, when it exists (the layout above). A
-- P:ld without a flag letter (written before flags existed) reads all three anyway.
local function flag(id, bit, on)
  local key = P .. ':ld:' .. id
  local v = redis.call('GET', key)
  if not v then return end
  local f = string.byte(v) - 97
  if f < 0 or (f % (2 * bit) >= bit) == on then return end
  redis.call('SET', key, string.char(97 + f + (on and bit or -bit)) .. string.sub(v, 2), 'KEEPTTL')
end`,
  },
  oldest: {
    needs: ['now'],
    lua: String.raw`
local function oldest_bucket() return math.floor(NOW / BUCKET) - BUCKETS + 1 end
local KIND = { ok = 1, banned = 2, rate_limited = 3, unreachable = 4 }`,
  },
  statsRaw: {
    needs: [],
    lua: String.raw`
-- A proxy's raw statistics slots; the replica sums those inside the window.
local function stats_raw(id)
  return redis.call('HVALS', P .. ':stats:' .. id)
end`,
  },
  statsAdd: {
    needs: ['oldest', 'flags'],
    lua: String.raw`
-- Proxy statistics: one field per ring slot.
local function stats_add(id, result)
  flag(id, STATS, true)
  local key = P .. ':stats:' .. id
  local b = math.floor(NOW / BUCKET)
  local slot = b % BUCKETS
  local c = { 0, 0, 0, 0 }
  local v = redis.call('HGET', key, slot)
  if v then
    local f = {}
    for x in string.gmatch(v, '%S+') do f[#f + 1] = tonumber(x) end
    if f[1] == b then c = { f[2], f[3], f[4], f[5] } end
  end
  c[KIND[result]] = c[KIND[result]] + 1
  redis.call('HSET', key, slot, b .. ' ' .. table.concat(c, ' '))
  redis.call('PEXPIRE', key, WINDOW + 60000)
end`,
  },
  entries: {
    needs: ['oldest'],
    lua: String.raw`
local function k_tgt(id) return P .. ':tgt:' .. id end
-- (proxy, target)'s cooldown end, the score of its P:targets member, as a string key: the
-- acquire reads a chunk's in its one MGET.
local function k_cd(id, target) return P .. ':cd:' .. id .. '\0' .. target end

-- (proxy, target) entries.
local function tdecode(v)
  if not v then return nil end
  local head, tail = string.match(v, '^([^|]*)|(.*)$')
  local h = {}
  for x in string.gmatch(head, '%S+') do h[#h + 1] = tonumber(x) end
  local e = { u = h[1], s = h[2], ru = h[3], rs = h[4], w = {} }
  for b, ok, ba, rl, un in string.gmatch(tail, '(%d+),(%d+),(%d+),(%d+),(%d+)') do
    b = tonumber(b)
    e.w[b % BUCKETS] = { b, tonumber(ok), tonumber(ba), tonumber(rl), tonumber(un) }
  end
  return e
end

-- Failure ratio of (proxy, target) over the window, or -1 when it had no bad report there.
local function failing_ratio(id, target)
  local e = tdecode(redis.call('HGET', k_tgt(id), target))
  if not e then return -1 end
  local oldest = oldest_bucket()
  local ok, bad = 0, 0
  for _, c in pairs(e.w) do
    if c[1] >= oldest then
      ok = ok + c[2]
      bad = bad + c[3] + c[4]
    end
  end
  if bad == 0 then return -1 end
  return bad / (bad + ok)
end`,
  },
  targets: {
    needs: ['entries', 'keep', 'count', 'flags'],
    lua: String.raw`
local function k_tord(id) return P .. ':tord:' .. id end
local function k_egress(id) return P .. ':egress:' .. id end

-- base x 2^(streak - 1), capped, spread by +-JITTER, capped again (cooldown-policy.ts).
local function cooldown(streak, base, max, random)
  local s = math.max(streak, 1) - 1
  if s > 40 then s = 40 end
  local spread = math.min(base * 2 ^ s, max) * (1 + JITTER * (2 * random - 1))
  return math.floor(math.min(spread, max) + 0.5)
end

local function tencode(e)
  local parts = {}
  local oldest = oldest_bucket()
  for _, c in pairs(e.w) do
    if c[1] >= oldest then parts[#parts + 1] = table.concat(c, ',') end
  end
  return e.u .. ' ' .. e.s .. ' ' .. e.ru .. ' ' .. e.rs .. '|' .. table.concat(parts, ';')
end

local function window_add(w, result)
  local b = math.floor(NOW / BUCKET)
  local slot = b % BUCKETS
  local c = w[slot]
  if not c or c[1] ~= b then
    c = { b, 0, 0, 0, 0 }
    w[slot] = c
  end
  c[KIND[result] + 1] = c[KIND[result] + 1] + 1
end

local function member(id, target) return id .. '\0' .. target end

local function forget_target(id, target)
  redis.call('HDEL', k_tgt(id), target)
  redis.call('DEL', k_cd(id, target))
  redis.call('ZREM', k_tord(id), target)
  redis.call('ZREM', K_TARGETS, member(id, target))
  -- Its last entry gone: its acquire need not look for cooldowns.
  if redis.call('EXISTS', k_tord(id)) == 0 then flag(id, COOL, false) end
end

-- Room for a new (proxy, target) entry. At a cap the entry whose cooldown ended longest ago
-- goes (a streak or an ended cooldown); when every cooldown at the cap still runs, nothing
-- goes and the new target is not recorded: eviction never lifts a running cooldown.
local function admit(id)
  local tord = k_tord(id)
  if redis.call('ZCARD', tord) >= MAX_TPP then
    local first = redis.call('ZRANGE', tord, 0, 0, 'WITHSCORES')
    if tonumber(first[2]) > NOW then return false end
    forget_target(id, first[1])
    count('cooldownsEvicted')
  end
  if redis.call('ZCARD', K_TARGETS) >= MAX_TE then
    local first = redis.call('ZRANGE', K_TARGETS, 0, 0, 'WITHSCORES')
    if tonumber(first[2]) > NOW then return false end
    local sep = string.find(first[1], '\0', 1, true)
    forget_target(string.sub(first[1], 1, sep - 1), string.sub(first[1], sep + 1))
    count('cooldownsEvicted')
  end
  return true
end

-- Records a report for (proxy, target): returns the cooldown's end when it started or
-- extended one, false when the entry could not be recorded at a cap, nil otherwise.
local function target_report(id, target, result, retry_after, random)
  local key = k_tgt(id)
  local e = tdecode(redis.call('HGET', key, target))
  if result == 'ok' then
    if not e then return nil end
    e.s = 0
    e.rs = 0
    window_add(e.w, result)
    redis.call('HSET', key, target, tencode(e))
    return nil
  end
  if not e then
    if not admit(id) then return false end
    e = { u = 0, s = 0, ru = 0, rs = 0, w = {} }
  end
  local ends
  if SINGLE or result == 'banned' then
    -- A streak goes cold when no bad report came for a whole maximum cooldown after the last.
    if e.u + BAN_MAX <= NOW then e.s = 0 end
    e.s = e.s + 1
    e.u = math.max(e.u, NOW + cooldown(e.s, BAN_BASE, BAN_MAX, random))
    ends = e.u
  else
    if e.ru + RL_MAX <= NOW then e.rs = 0 end
    e.rs = e.rs + 1
    -- The site said when to come back: exactly that (1 s .. the longest ban), else the policy.
    local rest = cooldown(e.rs, RL_BASE, RL_MAX, random)
    if retry_after >= 0 then rest = math.min(math.max(retry_after, 1000), BAN_MAX) end
    e.ru = math.max(e.ru, NOW + rest)
    ends = e.ru
  end
  window_add(e.w, result)
  local score = math.max(e.u, e.ru)
  redis.call('HSET', key, target, tencode(e))
  redis.call('ZADD', k_tord(id), score, target)
  redis.call('ZADD', K_TARGETS, score, member(id, target))
  flag(id, COOL, true)
  redis.call('SET', k_cd(id, target), score, 'PX', RETAIN)
  keep(key, RETAIN)
  keep(k_tord(id), RETAIN)
  keep(K_TARGETS, RETAIN)
  -- The egress these cooldowns belong to lives as long as they do (the egress script).
  keep(k_egress(id), RETAIN)
  return ends
end

-- Forgets every (proxy, target) entry of one proxy; answers how many cooldowns were running.
local function forget_proxy(id)
  local running = redis.call('ZCOUNT', k_tord(id), '(' .. NOW, '+inf')
  for _, target in ipairs(redis.call('HKEYS', k_tgt(id))) do forget_target(id, target) end
  -- Who reported them (the replica's reporters hash, ban-agreement.ts) goes with them.
  redis.call('DEL', P .. ':rep:' .. id)
  return running
end`,
  },
  held: {
    needs: ['now'],
    lua: String.raw`
local function k_hold(id) return P .. ':hold:' .. id end

-- Why a hold keeps a proxy at addr out of every lease, or nil.
local function held(h, addr)
  if h.sa == addr and h.su > NOW then return 'suspect' end
  if h.da == addr then return 'down' end
  return nil
end`,
  },
  holds: {
    needs: ['held', 'count', 'flags'],
    lua: String.raw`
-- Holds: sa/ss/su = suspect address, since, deadline; da = down address; ca/ct = address and
-- time of the last suspicion a probe ended (the abuse guard's hold-off).
local function hold_get(id)
  local v = redis.call('GET', k_hold(id))
  if v then return cjson.decode(v) end
  return {}
end

local function hold_put(id, h)
  if next(h) == nil then
    redis.call('DEL', k_hold(id))
    flag(id, HOLD, false)
  else
    flag(id, HOLD, true)
    redis.call('SET', k_hold(id), cjson.encode(h), 'PX', RETAIN)
  end
end

local function clear_suspicion(id, h)
  h.sa = nil
  h.ss = nil
  h.su = nil
  redis.call('ZREM', K_SUSPECTS, id)
end

-- A suspicion past its deadline ends unanswered; returns true when it did so now.
local function expire_suspicion(id, h)
  if h.sa ~= nil and h.su <= NOW then
    clear_suspicion(id, h)
    count('suspicionsExpired')
    count('freed')
    return true
  end
  return false
end`,
  },
  suspicions: {
    needs: ['holds'],
    lua: String.raw`
local function prune_suspicions(limit)
  local due = redis.call('ZRANGEBYSCORE', K_SUSPECTS, '-inf', NOW, 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    local h = hold_get(id)
    if not expire_suspicion(id, h) then redis.call('ZREM', K_SUSPECTS, id) end
    hold_put(id, h)
  end
end`,
  },
  sessions: {
    needs: ['now', 'count'],
    lua: String.raw`
local function prune_sessions(limit)
  local idle = redis.call('ZRANGEBYSCORE', K_SESS_USED, '-inf', NOW - IDLE, 'LIMIT', 0, limit)
  for _, key in ipairs(idle) do
    redis.call('HDEL', K_SESS, key)
    redis.call('ZREM', K_SESS_USED, key)
  end
end

-- The proxy a live session is bound to; an idle-expired session is forgotten here.
local function bound_to(session)
  local bound = redis.call('HGET', K_SESS, session)
  if not bound then return nil end
  local used = redis.call('ZSCORE', K_SESS_USED, session)
  if not used or tonumber(used) + IDLE <= NOW then
    redis.call('HDEL', K_SESS, session)
    redis.call('ZREM', K_SESS_USED, session)
    return nil
  end
  return bound
end

-- known: the session is bound right now (bound_to said so), so the cap has room for it.
local function bind(session, id, known)
  if not known and redis.call('HEXISTS', K_SESS, session) == 0 and redis.call('HLEN', K_SESS) >= MAX_SESSIONS then
    prune_sessions(1000)
    if redis.call('HLEN', K_SESS) >= MAX_SESSIONS then
      local oldest = redis.call('ZPOPMIN', K_SESS_USED)
      if oldest[1] then redis.call('HDEL', K_SESS, oldest[1]) end
      count('sessionsEvicted')
    end
  end
  redis.call('HSET', K_SESS, session, id)
  redis.call('ZADD', K_SESS_USED, NOW, session)
  redis.call('PEXPIRE', K_SESS, IDLE + 60000)
  redis.call('PEXPIRE', K_SESS_USED, IDLE + 60000)
end`,
  },
  leases: {
    needs: ['now'],
    lua: String.raw`
local function k_lease(id) return P .. ':lease:' .. id end

-- A lease's fields: proxy, addr, ttl, at, exp, target, sel, rec, session.
local function lease_decode(v)
  local f, from = {}, 1
  for i = 1, 8 do
    local to = string.find(v, '\0', from, true)
    f[i] = string.sub(v, from, to - 1)
    from = to + 1
  end
  f[9] = string.sub(v, from)
  return f
end

-- The proxy address a lease was taken at: its own field, or (leases taken without one: the
-- acquire sends no address per candidate) from its record JSON.
local function addr_of(f)
  if f[2] ~= '' then return f[2] end
  local r = cjson.decode(f[8])
  return r.ip .. ':' .. r.port
end

-- A live lease's fields and its stored value, or nil when unknown or expired.
local function live_lease(id)
  local v = redis.call('GET', k_lease(id))
  if not v then return nil end
  local f = lease_decode(v)
  if tonumber(f[5]) <= NOW then return nil end
  return f, v
end`,
  },
  loads: {
    needs: ['now', 'int', 'keep'],
    lua: String.raw`
local function k_load(id) return P .. ':load:' .. id end
local function k_ld(id) return P .. ':ld:' .. id end

-- A flag letter for bits f (nil: unknown, so all three).
local function letter(f) return string.char(97 + (f or 7)) end

-- A proxy's live leases from its P:ld value v ("Fn e m"): n itself while n is 0 (its zset
-- holds only the sentinel) or e is still ahead; else its zset is pruned and the value
-- rewritten. Returns the live count, then e and m as the strings they were (written back
-- as they are), then the flag bits (nil for a value without them); or 0 and nils when the
-- proxy has no load keys.
local function load_of(id, v)
  if not v then return 0, nil, nil, nil end
  local f, from = string.byte(v) - 97, 2
  if f < 0 then f, from = nil, 1 end
  local a = string.find(v, ' ', from, true)
  local b = string.find(v, ' ', a + 1, true)
  local n = tonumber(string.sub(v, from, a - 1))
  local e, m = string.sub(v, a + 1, b - 1), string.sub(v, b + 1)
  if n == 0 or tonumber(e) > NOW then return n, e, m, f end
  local key = k_load(id)
  -- '(-inf': the sentinel (member '', score -inf) stays.
  redis.call('ZREMRANGEBYSCORE', key, '(-inf', NOW_S or int(NOW))
  local first = redis.call('ZRANGE', key, 0, 1, 'WITHSCORES')
  if first[1] ~= '' then
    -- No sentinel: this zset is not the one written with P:ld (both should live and die
    -- together); dropping P:ld sends the next lease here down load_put's full path.
    redis.call('DEL', k_ld(id))
    return redis.call('ZCARD', key), nil, nil, nil
  end
  n = redis.call('ZCARD', key) - 1
  if n > 0 then e = first[4] end
  redis.call('SET', k_ld(id), letter(f) .. int(n) .. ' ' .. e .. ' ' .. m, 'KEEPTTL')
  return n, e, m, f
end

-- Writes a proxy's load n (a number, at least 1) after a lease was added or extended (its
-- expiry exp, and exp_s as a string), given e and m as load_of returned them and the flag
-- bits f to keep (nil: all three). While exp is within m that is one SET. Else m moves to
-- exp + SLACK, and with it the life of both keys (m plus a minute), the zset's sentinel
-- (member '' at -inf: the zset never empties, so it keeps its life while P:ld has one) and
-- the proxy's entry in P:busy: once per SLACK per busy proxy. Returns n as a string. ld_key:
-- P:ld:<id> when the caller has it already (a new string costs ~0.5 µs here).
local function load_put(id, n, e, m, exp, exp_s, ld_key, f)
  ld_key = ld_key or k_ld(id)
  if e == nil or n == 1 or exp < tonumber(e) then e = exp_s end
  local n_s = int(n)
  if m ~= nil and exp <= tonumber(m) then
    redis.call('SET', ld_key, letter(f) .. n_s .. ' ' .. e .. ' ' .. m, 'KEEPTTL')
    return n_s
  end
  local later = exp + SLACK
  m = int(later)
  local life = int(math.ceil(later - NOW + 60000))
  local key = k_load(id)
  redis.call('ZADD', key, '-inf', '')
  redis.call('PEXPIRE', key, life)
  redis.call('SET', ld_key, letter(f) .. n_s .. ' ' .. e .. ' ' .. m, 'PX', life)
  redis.call('ZADD', K_BUSY, m, id)
  keep(K_BUSY, life)
  return n_s
end`,
  },
  requests: {
    needs: [],
    lua: String.raw`
-- A write's first outcome by its request key (request-outcomes.ts: kind, owner, request id,
-- lease), kept REQ_RETAIN: a repeat answers it instead of writing again.
local function recall(key)
  if key == '' then return nil end
  return redis.call('GET', P .. ':req:' .. key)
end
local function remember(key, v)
  if key ~= '' then redis.call('SET', P .. ':req:' .. key, v, 'PX', REQ_RETAIN) end
end`,
  },
  releaseOne: {
    needs: [],
    lua: String.raw`
-- Ends a lease. Answers "proxyID\0its leases now" (-1: not counted there any more) when the
-- lease was known, else false. Needs no clock: what it removes was counted, live or ended.
-- A load string that reaches 0 stays (with its zset's sentinel, until both expire): the
-- next lease on the proxy is then two writes, not five. A slot freed counts in 'freed': a
-- replica's remembered refusal (refusal-memo.ts) holds only while that count does.
local function release_one(id)
  local v = redis.call('GETDEL', P .. ':lease:' .. id)
  if not v then return false end
  local proxy = string.sub(v, 1, string.find(v, '\0', 1, true) - 1)
  if redis.call('ZREM', P .. ':load:' .. proxy, id) == 0 then return proxy .. '\0-1' end
  redis.call('HINCRBY', K_COUNTERS, 'freed', 1)
  redis.call('PEXPIRE', K_COUNTERS, 30 * 24 * 3600 * 1000)
  local ld = P .. ':ld:' .. proxy
  local entry = redis.call('GET', ld)
  if not entry then return proxy .. '\0-1' end
  -- "Fn e m" (the header), or "n e m" from before the flag letter. The last lease of a proxy
  -- is the common case: "F1 ..." becomes "F0 ..." with no number converted.
  if string.sub(entry, 2, 3) == '1 ' then
    redis.call('SET', ld, string.sub(entry, 1, 1) .. '0' .. string.sub(entry, 3), 'KEEPTTL')
    return proxy .. '\0' .. '0'
  end
  local from = string.byte(entry) >= 97 and 2 or 1
  local sp = string.find(entry, ' ', from, true)
  local n = tonumber(string.sub(entry, from, sp - 1)) - 1
  if n < 0 then n = 0 end
  local n_s = string.format('%d', n)
  redis.call('SET', ld, string.sub(entry, 1, from - 1) .. n_s .. string.sub(entry, sp), 'KEEPTTL')
  return proxy .. '\0' .. n_s
end`,
  },
  reportOne: {
    needs: ['now', 'int', 'keep', 'holds', 'targets', 'leases', 'statsAdd'],
    lua: String.raw`
-- Records one report on a live lease: id, result, target override ('\0' = the lease's),
-- retryAfterSeconds ('' = none), random (the jitter), the reporter's name and '1' when it is
-- trusted for rotation (ban-agreement.ts: kept in P:rep:<proxy>, field "target\0reporter" =
-- the end its report gave, '*' for the trusted mark). Answers "target\0cooldownUntil (-1
-- none, -2 not recorded at a cap)\0suspect (-1 n/a, 0, 1)\0probeRequested (-1, 0, 1)" and the
-- lease value, or false when the lease is unknown or ended.
local function report_one(id, result, target, retry_s, random, reporter, trusted)
  local f, v = live_lease(id)
  if not f then return false end
  if target == '\0' then target = f[6] end
  local retry_after = -1
  if retry_s ~= '' then retry_after = tonumber(retry_s) * 1000 end
  local proxy, addr = f[1], addr_of(f)
  stats_add(proxy, result)
  local ends, suspect, probe = -1, -1, -1
  if result == 'unreachable' then
    local h = hold_get(proxy)
    expire_suspicion(proxy, h)
    if h.sa == addr then
      suspect, probe = 1, 0
    elseif h.ca == addr and NOW < h.ct + HOLDOFF then
      suspect, probe = 0, 0
    else
      h.sa = addr
      h.ss = NOW
      h.su = NOW + SUSPICION
      redis.call('ZADD', K_SUSPECTS, h.su, proxy)
      keep(K_SUSPECTS, RETAIN)
      count('suspicionsRaised')
      -- since: the suspicion's token, which a passing recheck hands back (OBSERVE).
      redis.call('PUBLISH', CHANNEL, cjson.encode({ proxyID = proxy, address = addr, since = h.ss }))
      suspect, probe = 1, 1
    end
    hold_put(proxy, h)
  else
    local r = target_report(proxy, target, result, retry_after, tonumber(random))
    if r == false then ends = -2 elseif r ~= nil then ends = r end
    if ends >= 0 then
      local k_rep = P .. ':rep:' .. proxy
      redis.call('HSET', k_rep, target .. '\0' .. reporter, ends)
      if trusted == '1' then redis.call('HSET', k_rep, target .. '\0*', ends) end
      redis.call('PEXPIRE', k_rep, RETAIN)
    end
  end
  return target .. '\0' .. int(ends) .. '\0' .. suspect .. '\0' .. probe, v
end`,
  },
};

function header(s: ScriptSettings): string {
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
  ].join('\n');
}

/** A number as a Lua literal (settings are validated finite numbers). */
function lua(n: number): string {
  if (!Number.isFinite(n)) throw new Error(`not a finite number: ${n}`);
  return String(n);
}

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

/**
 * Leases a proxy. ARGV after now: leaseID, ttlSeconds, the lease key's life in ms (ttl plus
 * a minute), candidate count, then per candidate in the replica's (latency, id) order (its
 * place there is its rank): id, maxLeases, record JSON; then, left out from the last one
 * that has its default on (redis-book-codec.ts's acquireArgs): target ('' = global pool),
 * selector JSON ('{}'), session (''), session mode ('check' | 'moved' | 'none'), a bound
 * proxy the replica knows is not leasable for this request (''), the request key ('':
 * none; a key granted before answers dup, its lease id and stored value). Answers one string of
 * \0-separated fields (one bulk reply: a nested reply of ~15 elements cost the client ~10 µs
 * more to decode, docs/benchmarks.md; the codec's decodeAcquireReply reads it): ok, proxyID,
 * now, expiresAt, moved, load, hints, then the statistics slots; or need, boundProxyID (the
 * session's proxy was not among the candidates); or none, leasable, cooling, moved, ms until
 * the first cooldown among them ends (-1: none), hints. Hints: "i:load" for each candidate
 * i (1-based) with leases, "i:h" for one a hold keeps out, comma-separated; every other
 * candidate has none.
 *
 * Written for its common path, an idle proxy among idle candidates (docs/benchmarks.md, issue
 * 21's third round): each closure, table, new string, number conversion and argument costs
 * Redis ~1-3k instructions here, about a microsecond, so that path makes as few as it can:
 * no helper defined up front (busy proxies, new load strings, sessions, holds and the
 * failure ratio are behind loaders), no number converted that need not be, writes made of
 * the strings it was sent or read.
 */
const ACQUIRE = String.raw`
local ARGV = ARGV
local lease_id = ARGV[A + 1]
local ttl = ARGV[A + 2]
local n = tonumber(ARGV[A + 4])
-- Candidate i's fields: id ARGV[B + 3i - 2], maxLeases B + 3i - 1, record B + 3i.
local B = A + 4
local T = B + 3 * n
local target = ARGV[T + 1] or ''
local session = ARGV[T + 3] or ''
local mode = ARGV[T + 4] or 'none'
-- A request key granted before (request-outcomes.ts): that lease again, no second one.
local rk = ARGV[T + 6] or ''
if rk ~= '' then
  local prior = redis.call('GET', P .. ':req:' .. rk)
  if prior then return 'dup\0' .. prior end
end

-- The session first: a binding to a proxy the replica did not send costs no reads.
local moved = false
local bound_i
if session ~= '' and mode == 'check' then
  if not bound_to then bound_to, bind = load_sessions() end
  local bound = bound_to(session)
  if bound then
    if bound == (ARGV[T + 5] or '') then
      moved = true
    else
      for i = 1, n do
        if ARGV[B + 3 * i - 2] == bound then bound_i = i end
      end
      if not bound_i then return 'need\0' .. bound end
    end
  end
elseif mode == 'moved' then
  moved = true
end

-- One MGET of the chunk's load strings ("Fn e m", the header); their flags say which holds
-- and cooldowns for the target to read too (all for a proxy without one): a second MGET only
-- when some proxy may have any. load[i]: the candidate's live leases, -1 while a hold keeps
-- it out. The tables of the rare cases are made when first needed: extra (what the second
-- MGET read for whom), busy (e, m and flags of a proxy with leases), cool and entry
-- (cooldowns).
local keys, load = {}, {}
local got, extra, more, busy, cool, entry
if n > 0 then
  for i = 1, n do keys[i] = P .. ':ld:' .. ARGV[B + 3 * i - 2] end
  got = redis.call('MGET', unpack(keys))
  local ekeys
  for i = 1, n do
    local v = got[i]
    local f = v and string.byte(v) - 97 or -1
    if f < 0 or f % 4 ~= 0 then
      local id = ARGV[B + 3 * i - 2]
      ekeys, extra = ekeys or {}, extra or {}
      local x = {}
      if f < 0 or f % 2 == 1 then
        ekeys[#ekeys + 1] = P .. ':hold:' .. id
        x.hold = #ekeys
      end
      if f < 0 or f % 4 >= 2 then
        ekeys[#ekeys + 1] = P .. ':cd:' .. id .. '\0' .. target
        x.cd = #ekeys
      end
      extra[i] = x
    end
  end
  if ekeys then more = redis.call('MGET', unpack(ekeys)) end
end
local hints = ''
for i = 1, n do
  local x = extra and extra[i]
  local h = x and x.hold and more[x.hold]
  if h then
    if not held then held = load_holds() end
    local r = cjson.decode(ARGV[B + 3 * i])
    if held(cjson.decode(h), r.ip .. ':' .. r.port) ~= nil then
      load[i] = -1
      hints = hints .. ',' .. i .. ':h'
    end
  end
  if not load[i] then
    local v = got[i]
    if not v or string.sub(v, 2, 3) == '0 ' then
      -- Idle (its zset holds only the sentinel): its load string is read past if chosen.
      load[i] = 0
    else
      if not load_of then load_of, load_put = load_loads() end
      local l, e, m, f = load_of(ARGV[B + 3 * i - 2], v)
      load[i] = l
      busy = busy or {}
      busy[i] = { e, m, f }
      if l > 0 then hints = hints .. ',' .. i .. ':' .. l end
    end
    local ends = x and x.cd and more[x.cd]
    if ends then
      entry = entry or {}
      entry[i] = true
      if tonumber(ends) > NOW then
        cool = cool or {}
        cool[i] = tonumber(ends)
      end
    end
  end
end

-- Under its cap: an idle one unless its cap is 0 (no number to convert), a busy one below it.
local function room(i)
  local l = load[i]
  if l == 0 then return ARGV[B + 3 * i - 1] ~= '0' end
  return l < tonumber(ARGV[B + 3 * i - 1])
end

local chosen
if bound_i then
  if load[bound_i] >= 0 and not (cool and cool[bound_i]) and room(bound_i) then
    chosen = bound_i
  else
    moved = true
  end
end

local leasable, cooling, first_end = 0, 0, -1
if not chosen then
  -- Least loaded; among equals one without recent failures for the target, else the lowest
  -- failure ratio; then the replica's (latency, id) rank: the candidates' order.
  local ratio_of
  if entry then
    if not failing_ratio then failing_ratio = load_ratio() end
    local ratio = {}
    ratio_of = function(i)
      if ratio[i] == nil then ratio[i] = entry[i] and failing_ratio(ARGV[B + 3 * i - 2], target) or -1 end
      return ratio[i]
    end
  end
  for i = 1, n do
    local l = load[i]
    if l >= 0 then
      leasable = leasable + 1
      local c = cool and cool[i]
      if c then
        cooling = cooling + 1
        if first_end < 0 or c < first_end then first_end = c end
      elseif room(i) then
        -- Without any (proxy, target) entry among them every ratio is -1: the rank decides.
        if chosen == nil or l < load[chosen] or
          (entry and l == load[chosen] and ratio_of(i) < ratio_of(chosen)) then
          chosen = i
        end
      end
    end
  end
end

if not chosen then
  local wait = -1
  if first_end >= 0 then wait = first_end - NOW end
  return 'none\0' .. leasable .. '\0' .. cooling .. '\0' .. (moved and '1' or '0') .. '\0' .. wait .. '\0' ..
    string.sub(hints, 2)
end

local id = ARGV[B + 3 * chosen - 2]
local exp = NOW + tonumber(ttl) * 1000
local exp_s = string.format('%d', exp)
local now_s = NOW_S or string.format('%d', NOW)
-- The address field stays empty: readers take it from the record (leases block's addr_of).
local value = id .. '\0\0' .. ttl .. '\0' .. now_s .. '\0' .. exp_s .. '\0' ..
  target .. '\0' .. (ARGV[T + 2] or '{}') .. '\0' .. ARGV[B + 3 * chosen] .. '\0' .. session
redis.call('SET', P .. ':lease:' .. lease_id, value, 'PX', ARGV[A + 3])
if rk ~= '' then redis.call('SET', P .. ':req:' .. rk, lease_id .. '\0' .. value, 'PX', REQ_RETAIN) end
redis.call('ZADD', P .. ':load:' .. id, exp_s, lease_id)
local v = got[chosen]
local now_load = '1'
local f
if v and not (busy and busy[chosen]) and string.byte(v) >= 97 then
  -- Idle with a load string "F0 e m": it becomes "F1 exp m" while exp fits within m.
  local tail = string.sub(v, (string.find(v, ' ', 4, true)))
  f = string.byte(v) - 97
  if f >= STATS or exp > tonumber(tail) then f = nil end
  if f then redis.call('SET', keys[chosen], string.sub(v, 1, 1) .. '1 ' .. exp_s .. tail, 'KEEPTTL') end
end
local slots
if not f then
  -- A busy proxy, a new load string, m to move, or statistics to read: the general path.
  if not load_of then load_of, load_put = load_loads() end
  local e, m
  local b = busy and busy[chosen]
  if b then
    e, m, f = b[1], b[2], b[3]
  elseif v and string.byte(v) >= 97 then
    local at = string.find(v, ' ', 4, true)
    e, m, f = string.sub(v, 4, at - 1), string.sub(v, at + 1), string.byte(v) - 97
  end
  -- Its statistics, when it may have some; none found: the flag goes with this write.
  if not f or f >= STATS then
    slots = redis.call('HVALS', P .. ':stats:' .. id)
    if f and #slots == 0 then f = f - STATS end
  end
  if not f then
    -- A new load string (or one from before flags): its flags from what is there. The hold
    -- and the cooldown for this target were read above.
    local x = extra[chosen]
    f = (more[x.hold] and HOLD or 0) + (#slots > 0 and STATS or 0)
    if more[x.cd] or redis.call('EXISTS', P .. ':tord:' .. id) == 1 then f = f + COOL end
  end
  now_load = load_put(id, load[chosen] + 1, e, m, exp, exp_s, keys[chosen], f)
end
if session ~= '' then
  if not bind then bound_to, bind = load_sessions() end
  bind(session, id, chosen == bound_i)
end
-- Chosen, so not held: no second look at its hold.
local reply = 'ok\0' .. id .. '\0' .. now_s .. '\0' .. exp_s .. '\0' .. (moved and '1' or '0') .. '\0' ..
  now_load .. '\0' .. string.sub(hints, 2)
if slots and #slots > 0 then reply = reply .. '\0' .. table.concat(slots, '\0') end
return reply
`;

/**
 * ARGV after now: leaseID, ttlSeconds ('' = the lease's own), request key ('' = none:
 * request-outcomes.ts). Answers {lease value, load, hold reason ('' = none), stats slots,
 * now}, or nil. A repeat of a request key answers the first renewal's value, extended no
 * further.
 */
const RENEW = String.raw`
local id = ARGV[A + 1]
local rk = ARGV[A + 3] or ''
local prior = recall(rk)
if prior then
  local f = lease_decode(prior)
  local load = load_of(f[1], redis.call('GET', k_ld(f[1])))
  return { prior, load, held(hold_get(f[1]), addr_of(f)) or '', stats_raw(f[1]), NOW }
end
local f = live_lease(id)
if not f then return false end
local ttl = tonumber(ARGV[A + 2] ~= '' and ARGV[A + 2] or f[3])
local exp, exp_s = tonumber(f[5]), f[5]
if NOW + ttl * 1000 > exp then
  exp = NOW + ttl * 1000
  exp_s = int(exp)
end
f[5] = exp_s
local v = table.concat(f, '\0')
redis.call('SET', k_lease(id), v, 'PX', int(math.ceil(exp - NOW + 60000)))
local proxy = f[1]
local load, first, last, flags = load_of(proxy, redis.call('GET', k_ld(proxy)))
if redis.call('ZADD', k_load(proxy), exp_s, id) == 1 then load = load + 1 end
load_put(proxy, load, first, last, exp, exp_s, nil, flags)
if f[9] ~= '' then
  local bound = bound_to(f[9])
  if bound then bind(f[9], bound, true) end
end
remember(rk, v)
return { v, load, held(hold_get(proxy), addr_of(f)) or '', stats_raw(proxy), NOW }
`;

/**
 * ARGV after now: leaseID, request key ('' = none). Answers release_one's answer (the
 * releaseOne block); a repeat of a request key answers the first one again.
 */
const RELEASE = String.raw`
local rk = ARGV[A + 2]
if rk then
  local prior = redis.call('GET', P .. ':req:' .. rk)
  if prior then
    if prior == '!' then return false end
    return prior
  end
end
local r = release_one(ARGV[A + 1])
if rk then redis.call('SET', P .. ':req:' .. rk, r or '!', 'PX', REQ_RETAIN) end
return r
`;

/**
 * Several reports as one atomic step, in order. ARGV after now: request key ('' = none),
 * count, then per report 8 fields: leaseID, result, target override ('\0' = none),
 * retryAfterSeconds ('' = none), a random number in [0, 1) (the cooldown's jitter), the
 * reporter's name, '1' when it is trusted for rotation, '1' to release the lease after its
 * report. Answers one string per report: "target\0cooldownUntil\0suspect\0probeRequested\0
 * released\0lease value" (report_one's fields; released -1 n/a, 1 ended), '' when the lease
 * is gone. A repeat of a request key answers the first answers, and '!' after them, and
 * records nothing.
 */
const REPORT = String.raw`
local rk = ARGV[A + 1]
local prior = recall(rk)
if prior then
  -- One element more than the reports: the replica's mark of a repeat.
  local first = cjson.decode(prior)
  first[#first + 1] = '!'
  return first
end
local out = {}
for i = 1, tonumber(ARGV[A + 2]) do
  local b = A + 2 + 8 * (i - 1)
  local head, v = report_one(ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6], ARGV[b + 7])
  if not head then
    out[i] = ''
  else
    local released = '-1'
    -- After the report: the proxy's last outcome is in the book before its slot frees.
    if ARGV[b + 8] == '1' then released = release_one(ARGV[b + 1]) and '1' or '0' end
    out[i] = head .. '\0' .. released .. '\0' .. v
  end
end
if rk ~= '' then remember(rk, cjson.encode(out)) end
return out
`;

/**
 * ARGV after now: proxyID, kind (probe_passed | down | up | catalog), address, the
 * suspicion's token (probe_passed: its ss, as the probe request carried it) / healthy.
 */
const OBSERVE = String.raw`
local id = ARGV[A + 1]
local kind = ARGV[A + 2]
local addr = ARGV[A + 3]
local h = hold_get(id)
expire_suspicion(id, h)
if kind == 'probe_passed' then
  -- The recheck answered this very suspicion: a token, never a time from another clock.
  if h.sa == addr and tonumber(ARGV[A + 4]) == h.ss then
    clear_suspicion(id, h)
    h.ca = addr
    h.ct = NOW
    count('freed')
  end
elseif kind == 'down' then
  h.da = addr
  if h.sa == addr then clear_suspicion(id, h) end
elseif kind == 'up' then
  if h.da == addr then
    h.da = nil
    count('freed')
  end
elseif kind == 'catalog' then
  -- The proxy moved to another address, or its status is healthy again (a replica saw it
  -- turn so): the down hold has served its purpose. Not when the status turns unhealthy:
  -- a replica whose cache lags would lease the dead proxy (proxy-holds.ts).
  if h.da ~= nil and (ARGV[A + 4] == '1' or h.da ~= addr) then
    h.da = nil
    count('freed')
  end
end
hold_put(id, h)
return 1
`;

/**
 * The proxies' egresses as a replica's catalog shows them (egress.ts's egressStep, the same
 * rule): ARGV after now: count, then per proxy its id and egress ("exit <ip>" | "ip <ip>").
 * A renewed egress (same kind, another address) forgets the proxy's cooldowns and streaks.
 * Every replica sends what it sees: the first one that brings news acts, the rest find the
 * egress known. Answers {running cooldowns forgotten, then the ids whose egress was renewed}.
 */
const EGRESS = String.raw`
local n = tonumber(ARGV[A + 1])
local forgotten = 0
local renewed = {}
for i = 1, n do
  local id = ARGV[A + 2 * i]
  local seen = ARGV[A + 2 * i + 1]
  local known = redis.call('GET', k_egress(id))
  if known ~= seen then
    if known and string.match(known, '^%S+') == string.match(seen, '^%S+') then
      forgotten = forgotten + forget_proxy(id)
      renewed[#renewed + 1] = id
      count('freed')
    end
    redis.call('SET', k_egress(id), seen, 'PX', RETAIN)
  end
end
return { forgotten, unpack(renewed) }
`;

/**
 * Reads only: what a replica checks a remembered refusal against (refusal-memo.ts): the
 * book's clock and its count of freed slots and lifted holds. One TIME, one HGET: a
 * refusal answered again costs Redis this, whatever the fleet's size.
 */
const REFUSAL = String.raw`
return { NOW, redis.call('HGET', K_COUNTERS, 'freed') or '0' }
`;

/** ARGV after now: leaseID. Answers the lease value, or nil. */
const GET = String.raw`
local _, v = live_lease(ARGV[A + 1])
return v or false
`;

/** ARGV after now: session key. */
const END_SESSION = String.raw`
redis.call('HDEL', K_SESS, ARGV[A + 1])
redis.call('ZREM', K_SESS_USED, ARGV[A + 1])
return 1
`;

/**
 * Answers the StoreTotals fields in the order of RedisLeaseStore.totals, with, in place of
 * the live leases, NOW and the proxies that may have some (P:busy): the replica counts their
 * leases with reads outside the script (a book-wide lease zset cost three commands per
 * lease+release for this gauge alone).
 */
const TOTALS = String.raw`
redis.call('ZREMRANGEBYSCORE', K_BUSY, '-inf', NOW)
prune_suspicions(1000)
local c = redis.call('HMGET', K_COUNTERS, 'sessionsEvicted', 'cooldownsEvicted', 'suspicionsRaised', 'suspicionsExpired')
return {
  NOW,
  redis.call('ZCOUNT', K_SESS_USED, '(' .. (NOW - IDLE), '+inf'),
  redis.call('ZCOUNT', K_TARGETS, '(' .. NOW, '+inf'),
  tonumber(c[1] or 0), tonumber(c[2] or 0),
  redis.call('ZCOUNT', K_SUSPECTS, '(' .. NOW, '+inf'),
  tonumber(c[3] or 0), tonumber(c[4] or 0),
  redis.call('ZRANGE', K_BUSY, '(' .. NOW, '+inf', 'BYSCORE'),
}
`;

/**
 * Frees what no longer matters, a bounded amount per call: ended leases from the count,
 * idle sessions, (proxy, target) entries whose cooldown ended and whose streak and window
 * went cold, and suspicions past their deadline. Correctness never waits for it.
 */
const SWEEP = String.raw`
redis.call('ZREMRANGEBYSCORE', K_BUSY, '-inf', NOW)
prune_sessions(1000)
prune_suspicions(1000)
local cold = redis.call('ZRANGEBYSCORE', K_TARGETS, '-inf', NOW - BAN_MAX - WINDOW, 'LIMIT', 0, 1000)
for _, m in ipairs(cold) do
  local sep = string.find(m, '\0', 1, true)
  forget_target(string.sub(m, 1, sep - 1), string.sub(m, sep + 1))
end
return #cold
`;

/**
 * Reads only, on the book's clock (its time in the reply: the replica decodes holds and
 * windows with it, never with its own). ARGV after now: proxy ids. Answers {NOW, live leases
 * per id, raw hold per id ('' = none), statistics slots per id}. A list page asks for 200.
 */
const USAGE = String.raw`
local n = #ARGV - A
local lds, hks = {}, {}
for i = 1, n do
  lds[i] = P .. ':ld:' .. ARGV[A + i]
  hks[i] = P .. ':hold:' .. ARGV[A + i]
end
-- Two MGETs and, per proxy, only what its P:ld (the layout above) cannot answer: its zset
-- when an expiry may have passed, its statistics unless the flags say it has none. A
-- command per key cost ~3x the Redis time of the pipeline this replaced.
local ld = redis.call('MGET', unpack(lds))
local hold = redis.call('MGET', unpack(hks))
local loads, holds, stats = {}, {}, {}
local after = '(' .. int(NOW)
for i = 1, n do
  local id, v, count, f = ARGV[A + i], ld[i], nil, nil
  if v then
    local from = 2
    f = string.byte(v) - 97
    if f < 0 then f, from = nil, 1 end
    local a = string.find(v, ' ', from, true)
    local b = string.find(v, ' ', a + 1, true)
    local c = tonumber(string.sub(v, from, a - 1))
    if c == 0 or tonumber(string.sub(v, a + 1, b - 1)) > NOW then count = c end
  end
  loads[i] = count or redis.call('ZCOUNT', P .. ':load:' .. id, after, '+inf')
  holds[i] = hold[i] or ''
  if f and math.floor(f / STATS) % 2 == 0 then stats[i] = {} else stats[i] = redis.call('HVALS', P .. ':stats:' .. id) end
end
return { NOW, loads, holds, stats }
`;

/**
 * Reads only: one proxy's usage keys and its running cooldowns (P:tord), on the book's
 * clock. ARGV after now: proxyID. Answers {NOW, live leases, raw hold ('' = none),
 * statistics slots, target/end pairs}.
 */
const STANDING = String.raw`
local id = ARGV[A + 1]
local after = '(' .. int(NOW)
return {
  NOW,
  redis.call('ZCOUNT', P .. ':load:' .. id, after, '+inf'),
  redis.call('GET', P .. ':hold:' .. id) or '',
  redis.call('HVALS', P .. ':stats:' .. id),
  redis.call('ZRANGEBYSCORE', P .. ':tord:' .. id, after, '+inf', 'WITHSCORES'),
  redis.call('HGETALL', P .. ':rep:' .. id),
}
`;

/**
 * Reads only: the suspicions running now, for a probe-request listener that just
 * (re)subscribed (a PUBLISH made while it was away is lost). Answers id, address, token
 * triples, flat; at most 10,000 (running suspicions are few: each asks for a probe at once).
 */
const SUSPECTS = String.raw`
local out = {}
local ids = redis.call('ZRANGEBYSCORE', K_SUSPECTS, '(' .. int(NOW), '+inf', 'LIMIT', 0, 10000)
for _, id in ipairs(ids) do
  local v = redis.call('GET', k_hold(id))
  if v then
    local h = cjson.decode(v)
    if h.sa ~= nil and h.su > NOW then
      out[#out + 1] = id
      out[#out + 1] = h.sa
      out[#out + 1] = int(h.ss)
    end
  end
end
return out
`;

/**
 * Helpers a script's common path never calls, defined by a loader on first use: Redis runs
 * the whole chunk on every call, and each helper defined up front is a closure made and
 * collected per call (the acquire made ~20; ~0.2 µs and ~100 bytes each here).
 */
interface Lazy {
  /** The loader's Lua name; the body calls it where it needs the exports. */
  loader: string;
  needs: readonly BlockName[];
  /** Helper names the loader returns, in this order (declared as locals above it). */
  exports: readonly string[];
}

interface Body {
  needs: readonly BlockName[];
  lazy?: readonly Lazy[];
  body: string;
}

const BODIES: Record<ScriptName, Body> = {
  acquire: {
    needs: ['now'],
    lazy: [
      { loader: 'load_loads', needs: ['loads'], exports: ['load_of', 'load_put'] },
      { loader: 'load_holds', needs: ['held'], exports: ['held'] },
      { loader: 'load_sessions', needs: ['sessions'], exports: ['bound_to', 'bind'] },
      { loader: 'load_ratio', needs: ['entries'], exports: ['failing_ratio'] },
    ],
    body: ACQUIRE,
  },
  renew: { needs: ['now', 'holds', 'sessions', 'leases', 'loads', 'statsRaw', 'requests'], body: RENEW },
  release: { needs: ['releaseOne'], body: RELEASE },
  report: { needs: ['requests', 'reportOne', 'releaseOne'], body: REPORT },
  observe: { needs: ['holds'], body: OBSERVE },
  egress: { needs: ['now', 'targets'], body: EGRESS },
  get: { needs: ['leases'], body: GET },
  endSession: { needs: [], body: END_SESSION },
  totals: { needs: ['now', 'suspicions'], body: TOTALS },
  sweep: { needs: ['sessions', 'suspicions', 'targets'], body: SWEEP },
  usage: { needs: ['now', 'int'], body: USAGE },
  standing: { needs: ['now', 'int'], body: STANDING },
  suspects: { needs: ['now', 'int', 'held'], body: SUSPECTS },
  refusal: { needs: ['now'], body: REFUSAL },
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

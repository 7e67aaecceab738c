// The Redis lease book's Lua scripts. Each operation of RedisLeaseStore is one of these, run
// with EVALSHA: atomic (nothing else runs on the server meanwhile) and one round trip. Every
// script starts with PRELUDE, which reads the book's settings from the first ARGV entries
// (see RedisLeaseStore.settingsArgs) and names the keys.
//
// Keys (P is the hash-tagged prefix, e.g. "{proxy-operator}", so every key of a book is in
// one Cluster slot; KEYS[1] is P..':counters', which routes the call, and the scripts derive
// the per-proxy keys from P):
//   P:lease:<id>        hash: proxy, rec (record JSON), addr, target, session, sel, ttl, at, exp
//   P:load:<proxy>      zset leaseID -> expiry (ms): the proxy's live leases
//   P:leases            zset leaseID -> expiry: every live lease (a count for totals)
//   P:sessions          hash session -> proxyID;  P:sessions-used  zset session -> last use
//   P:stats:<proxy>     hash slot -> "bucket ok banned rate_limited unreachable"
//   P:tgt:<proxy>       hash target -> "u s ru rs|b,ok,ba,rl,un;..." (cooldowns, streaks, window)
//   P:tord:<proxy>      zset target -> cooldown end: the proxy's targets, for its cap
//   P:targets           zset proxy\0target -> cooldown end: every entry (cap, active count)
//   P:holds             hash proxyID -> JSON {sa, ss, su, da, ca, ct}: suspect/down holds
//   P:suspects          zset proxyID -> suspicion deadline
//   P:counters          hash of monotonic counters
// Times are milliseconds since the epoch from Redis's TIME (one clock for every replica), or
// from ARGV[2] when a test drives the clock. Keys carry a real-time TTL as garbage collection
// only; every decision compares stored times with that clock.

const PRELUDE = String.raw`
local P = ARGV[1]
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local WINDOW = tonumber(ARGV[3])
local BUCKET = tonumber(ARGV[4])
local IDLE = tonumber(ARGV[5])
local MAX_SESSIONS = tonumber(ARGV[6])
local BAN_BASE = tonumber(ARGV[7])
local BAN_MAX = tonumber(ARGV[8])
local RL_BASE = tonumber(ARGV[9])
local RL_MAX = tonumber(ARGV[10])
local SINGLE = ARGV[11] == '1'
local SUSPICION = tonumber(ARGV[12])
local HOLDOFF = tonumber(ARGV[13])
local MAX_TPP = tonumber(ARGV[14])
local MAX_TE = tonumber(ARGV[15])
local RANDOM = tonumber(ARGV[16])
local JITTER = tonumber(ARGV[17])
local A = 17
local BUCKETS = 15
-- How long book state outlives its last write (real time): past the longest time it matters.
local RETAIN = math.max(BAN_MAX * 2 + WINDOW, IDLE, SUSPICION, HOLDOFF) + 60000

local K_COUNTERS = P .. ':counters'
local K_LEASES = P .. ':leases'
local K_SESS = P .. ':sessions'
local K_SESS_USED = P .. ':sessions-used'
local K_TARGETS = P .. ':targets'
local K_HOLDS = P .. ':holds'
local K_SUSPECTS = P .. ':suspects'
local CHANNEL = P .. ':probe-requests'
local function k_lease(id) return P .. ':lease:' .. id end
local function k_load(id) return P .. ':load:' .. id end
local function k_stats(id) return P .. ':stats:' .. id end
local function k_tgt(id) return P .. ':tgt:' .. id end
local function k_tord(id) return P .. ':tord:' .. id end

-- Extends a key's life to at least ms from now (never shortens it).
local function keep(key, ms)
  local ttl = redis.call('PTTL', key)
  if ttl == -1 or (ttl >= 0 and ttl < ms) then redis.call('PEXPIRE', key, ms) end
end

local function count(name, n)
  redis.call('HINCRBY', K_COUNTERS, name, n or 1)
  redis.call('PEXPIRE', K_COUNTERS, 30 * 24 * 3600 * 1000)
end

-- Live leases of a proxy: one call, no write (ended ones are pruned where the set is written).
local function load_of(id)
  return redis.call('ZCOUNT', k_load(id), '(' .. NOW, '+inf')
end

local function prune_load(id)
  redis.call('ZREMRANGEBYSCORE', k_load(id), '-inf', NOW)
end

-- base x 2^(streak - 1), capped, spread by +-JITTER, capped again (cooldown-policy.ts).
local function cooldown(streak, base, max)
  local s = math.max(streak, 1) - 1
  if s > 40 then s = 40 end
  local spread = math.min(base * 2 ^ s, max) * (1 + JITTER * (2 * RANDOM - 1))
  return math.floor(math.min(spread, max) + 0.5)
end

local KIND = { ok = 1, banned = 2, rate_limited = 3, unreachable = 4 }

local function oldest_bucket() return math.floor(NOW / BUCKET) - BUCKETS + 1 end

-- Proxy statistics: one field per ring slot.
local function stats_add(id, result)
  local key = k_stats(id)
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
end

local function stats_of(id)
  local all = redis.call('HGETALL', k_stats(id))
  local c = { 0, 0, 0, 0 }
  local oldest = oldest_bucket()
  for i = 2, #all, 2 do
    local f = {}
    for x in string.gmatch(all[i], '%S+') do f[#f + 1] = tonumber(x) end
    if f[1] >= oldest then
      for j = 1, 4 do c[j] = c[j] + f[j + 1] end
    end
  end
  return c
end

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
end

local function member(id, target) return id .. '\0' .. target end

local function forget_target(id, target)
  redis.call('HDEL', k_tgt(id), target)
  redis.call('ZREM', k_tord(id), target)
  redis.call('ZREM', K_TARGETS, member(id, target))
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
local function target_report(id, target, result, retry_after)
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
    e.u = math.max(e.u, NOW + cooldown(e.s, BAN_BASE, BAN_MAX))
    ends = e.u
  else
    if e.ru + RL_MAX <= NOW then e.rs = 0 end
    e.rs = e.rs + 1
    -- The site said when to come back: exactly that (1 s .. the longest ban), else the policy.
    local rest = cooldown(e.rs, RL_BASE, RL_MAX)
    if retry_after >= 0 then rest = math.min(math.max(retry_after, 1000), BAN_MAX) end
    e.ru = math.max(e.ru, NOW + rest)
    ends = e.ru
  end
  window_add(e.w, result)
  local score = math.max(e.u, e.ru)
  redis.call('HSET', key, target, tencode(e))
  redis.call('ZADD', k_tord(id), score, target)
  redis.call('ZADD', K_TARGETS, score, member(id, target))
  keep(key, RETAIN)
  keep(k_tord(id), RETAIN)
  keep(K_TARGETS, RETAIN)
  return ends
end

-- Holds: sa/ss/su = suspect address, since, deadline; da = down address; ca/ct = address and
-- time of the last suspicion a probe ended (the abuse guard's hold-off).
local function hold_get(id)
  local v = redis.call('HGET', K_HOLDS, id)
  if v then return cjson.decode(v) end
  return {}
end

local function hold_put(id, h)
  if next(h) == nil then
    redis.call('HDEL', K_HOLDS, id)
  else
    redis.call('HSET', K_HOLDS, id, cjson.encode(h))
    keep(K_HOLDS, RETAIN)
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
    return true
  end
  return false
end

local function held(h, addr)
  if h.sa == addr and h.su > NOW then return 'suspect' end
  if h.da == addr then return 'down' end
  return nil
end

local function prune_sessions(limit)
  local idle = redis.call('ZRANGEBYSCORE', K_SESS_USED, '-inf', NOW - IDLE, 'LIMIT', 0, limit)
  for _, key in ipairs(idle) do
    redis.call('HDEL', K_SESS, key)
    redis.call('ZREM', K_SESS_USED, key)
  end
end

local function prune_suspicions(limit)
  local due = redis.call('ZRANGEBYSCORE', K_SUSPECTS, '-inf', NOW, 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    local h = hold_get(id)
    if not expire_suspicion(id, h) then redis.call('ZREM', K_SUSPECTS, id) end
    hold_put(id, h)
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

local function bind(session, id)
  if redis.call('HEXISTS', K_SESS, session) == 0 and redis.call('HLEN', K_SESS) >= MAX_SESSIONS then
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
end

local LEASE_FIELDS = { 'proxy', 'rec', 'target', 'session', 'sel', 'ttl', 'at', 'exp', 'addr' }

-- A live lease's fields (LEASE_FIELDS order), or nil when unknown or expired.
local function live_lease(id)
  local f = redis.call('HMGET', k_lease(id), unpack(LEASE_FIELDS))
  if not f[1] or tonumber(f[8]) <= NOW then return nil end
  return f
end

-- activeLeases, 4 counts, hold reason ('' = none): a proxy's usage, flattened.
local function usage_of(id, addr, load, hold)
  local c = stats_of(id)
  if hold == nil then hold = held(hold_get(id), addr) or '' end
  return { load or load_of(id), c[1], c[2], c[3], c[4], hold }
end
`;

/**
 * Leases a proxy. ARGV after the settings: leaseID, ttlSeconds, target ('' = global pool),
 * session ('' = none), session mode ('check' | 'moved' | 'none'), a bound proxy the replica
 * knows is not leasable for this request (''), selector JSON, candidate count, then per
 * candidate: id, maxLeases, address, rank (its place in (latency, id) order), record JSON.
 * Answers {'ok', proxyID, acquiredAt, expiresAt, moved, usage..., hints...}, {'need',
 * boundProxyID} (the session's proxy was not among the candidates), or {'none', leasable,
 * cooling, moved, ms until the first cooldown among them ends (-1: none), hints...}; hints
 * are (id, load) pairs of the candidates it looked at.
 */
const ACQUIRE = String.raw`
local lease_id = ARGV[A + 1]
local ttl = tonumber(ARGV[A + 2])
local target = ARGV[A + 3]
local session = ARGV[A + 4]
local mode = ARGV[A + 5]
local gone = ARGV[A + 6]
local sel = ARGV[A + 7]
local n = tonumber(ARGV[A + 8])
local cands, by_id = {}, {}
for i = 1, n do
  local o = A + 8 + (i - 1) * 5
  local c = { id = ARGV[o + 1], max = tonumber(ARGV[o + 2]), addr = ARGV[o + 3], rank = tonumber(ARGV[o + 4]), rec = ARGV[o + 5] }
  if not by_id[c.id] then
    cands[#cands + 1] = c
    by_id[c.id] = c
  end
end

-- Everything the choice needs, a fixed number of calls for the whole chunk: the holds
-- (HMGET) and the cooldowns for the target (ZMSCORE), then one ZCOUNT per candidate not held.
local hints = {}
if #cands > 0 then
  local ids, members = {}, {}
  for i, c in ipairs(cands) do
    ids[i] = c.id
    members[i] = member(c.id, target)
  end
  local holds = redis.call('HMGET', K_HOLDS, unpack(ids))
  local ends = redis.call('ZMSCORE', K_TARGETS, unpack(members))
  for i, c in ipairs(cands) do
    c.held = holds[i] and held(cjson.decode(holds[i]), c.addr) ~= nil
    if not c.held then
      c.load = load_of(c.id)
      hints[#hints + 1] = c.id
      hints[#hints + 1] = c.load
      c.has_entry = ends[i] ~= false
      c.cooling = c.has_entry and tonumber(ends[i]) > NOW
      if c.cooling then c.ends = tonumber(ends[i]) end
    end
  end
end
local moved = false
local chosen
if session ~= '' and mode == 'check' then
  local bound = bound_to(session)
  if bound then
    if bound == gone then
      moved = true
    else
      local c = by_id[bound]
      if not c then return { 'need', bound } end
      if not c.held and not c.cooling and c.load < c.max then chosen = c else moved = true end
    end
  end
elseif mode == 'moved' then
  moved = true
end

local leasable, cooling, first_end = 0, 0, -1
if not chosen then
  -- Least loaded; among equals one without recent failures for the target, else the lowest
  -- failure ratio; then the replica's (latency, id) rank (lease-selection.ts's rule).
  local function ratio_of(c)
    if c.ratio == nil then c.ratio = c.has_entry and failing_ratio(c.id, target) or -1 end
    return c.ratio
  end
  local function before(a, b)
    if a.load ~= b.load then return a.load < b.load end
    local ra, rb = ratio_of(a), ratio_of(b)
    if ra ~= rb then return ra < rb end
    return a.rank < b.rank
  end
  local best
  for _, c in ipairs(cands) do
    if not c.held then
      leasable = leasable + 1
      if c.cooling then
        cooling = cooling + 1
        if first_end < 0 or c.ends < first_end then first_end = c.ends end
      elseif c.load < c.max and (best == nil or before(c, best)) then
        best = c
      end
    end
  end
  chosen = best
end

if not chosen then
  local wait = -1
  if first_end >= 0 then wait = first_end - NOW end
  local out = { 'none', leasable, cooling, moved and 1 or 0, wait }
  for _, h in ipairs(hints) do out[#out + 1] = h end
  return out
end

local exp = NOW + ttl * 1000
local key = k_lease(lease_id)
redis.call('HSET', key, 'proxy', chosen.id, 'rec', chosen.rec, 'addr', chosen.addr, 'target', target,
  'session', session, 'sel', sel, 'ttl', ARGV[A + 2], 'at', NOW, 'exp', exp)
redis.call('PEXPIRE', key, ttl * 1000 + 60000)
prune_load(chosen.id)
redis.call('ZADD', k_load(chosen.id), exp, lease_id)
keep(k_load(chosen.id), ttl * 1000 + 60000)
redis.call('ZADD', K_LEASES, exp, lease_id)
keep(K_LEASES, ttl * 1000 + 60000)
if session ~= '' then bind(session, chosen.id) end
local out = { 'ok', chosen.id, NOW, exp, moved and 1 or 0 }
-- Chosen, so not held: no second look at its hold.
for _, v in ipairs(usage_of(chosen.id, chosen.addr, chosen.load + 1, '')) do out[#out + 1] = v end
for _, h in ipairs(hints) do out[#out + 1] = h end
return out
`;

/** ARGV: leaseID, ttlSeconds ('' = the lease's own). Answers lease fields + usage, or nil. */
const RENEW = String.raw`
local id = ARGV[A + 1]
local f = live_lease(id)
if not f then return false end
local ttl = tonumber(ARGV[A + 2] ~= '' and ARGV[A + 2] or f[6])
local exp = math.max(tonumber(f[8]), NOW + ttl * 1000)
local key = k_lease(id)
redis.call('HSET', key, 'exp', exp)
keep(key, exp - NOW + 60000)
redis.call('ZADD', k_load(f[1]), exp, id)
keep(k_load(f[1]), exp - NOW + 60000)
redis.call('ZADD', K_LEASES, exp, id)
keep(K_LEASES, exp - NOW + 60000)
if f[4] ~= '' then
  local bound = bound_to(f[4])
  if bound then bind(f[4], bound) end
end
f[8] = exp
for _, v in ipairs(usage_of(f[1], f[9])) do f[#f + 1] = v end
return f
`;

/** ARGV: leaseID. Answers {proxyID, its load} when the lease was live, else nil. */
const RELEASE = String.raw`
local id = ARGV[A + 1]
local key = k_lease(id)
local proxy = redis.call('HGET', key, 'proxy')
redis.call('DEL', key)
redis.call('ZREM', K_LEASES, id)
if not proxy then return false end
redis.call('ZREM', k_load(proxy), id)
return { proxy, load_of(proxy) }
`;

/**
 * ARGV: leaseID, result, target override ('\0' = none), retryAfterSeconds ('' = none).
 * Answers lease fields + {target, cooldownUntil (-1 none, -2 not recorded at a cap),
 * suspect (-1 n/a, 0, 1), probeRequested (-1, 0, 1)}, or nil.
 */
const REPORT = String.raw`
local id = ARGV[A + 1]
local result = ARGV[A + 2]
local f = live_lease(id)
if not f then return false end
local target = ARGV[A + 3]
if target == '\0' then target = f[3] end
local retry_after = -1
if ARGV[A + 4] ~= '' then retry_after = tonumber(ARGV[A + 4]) * 1000 end
local proxy, addr = f[1], f[9]
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
    redis.call('PUBLISH', CHANNEL, cjson.encode({ proxyID = proxy, address = addr }))
    suspect, probe = 1, 1
  end
  hold_put(proxy, h)
else
  local r = target_report(proxy, target, result, retry_after)
  if r == false then ends = -2 elseif r ~= nil then ends = r end
end
f[10] = target
f[11] = ends
f[12] = suspect
f[13] = probe
return f
`;

/** ARGV: proxyID, kind (probe_passed | down | up | catalog), address, startedAt / healthy. */
const OBSERVE = String.raw`
local id = ARGV[A + 1]
local kind = ARGV[A + 2]
local addr = ARGV[A + 3]
local h = hold_get(id)
expire_suspicion(id, h)
if kind == 'probe_passed' then
  if h.sa == addr and tonumber(ARGV[A + 4]) >= h.ss then
    clear_suspicion(id, h)
    h.ca = addr
    h.ct = NOW
  end
elseif kind == 'down' then
  h.da = addr
  if h.sa == addr then clear_suspicion(id, h) end
elseif kind == 'up' then
  if h.da == addr then h.da = nil end
elseif kind == 'catalog' then
  -- The proxy's status caught up (unhealthy) or it moved to another address: the book's
  -- down hold has served its purpose.
  if h.da ~= nil and (ARGV[A + 4] ~= '1' or h.da ~= addr) then h.da = nil end
end
hold_put(id, h)
return 1
`;

/** ARGV: leaseID. Answers the lease fields, or nil. */
const GET = String.raw`
return live_lease(ARGV[A + 1]) or false
`;

/** ARGV: session key. */
const END_SESSION = String.raw`
redis.call('HDEL', K_SESS, ARGV[A + 1])
redis.call('ZREM', K_SESS_USED, ARGV[A + 1])
return 1
`;

/** Answers the StoreTotals fields in the order of RedisLeaseStore.totals. */
const TOTALS = String.raw`
redis.call('ZREMRANGEBYSCORE', K_LEASES, '-inf', NOW)
prune_suspicions(1000)
local c = redis.call('HMGET', K_COUNTERS, 'sessionsEvicted', 'cooldownsEvicted', 'suspicionsRaised', 'suspicionsExpired')
return {
  redis.call('ZCARD', K_LEASES),
  redis.call('ZCOUNT', K_SESS_USED, '(' .. (NOW - IDLE), '+inf'),
  redis.call('ZCOUNT', K_TARGETS, '(' .. NOW, '+inf'),
  tonumber(c[1] or 0), tonumber(c[2] or 0),
  redis.call('ZCOUNT', K_SUSPECTS, '(' .. NOW, '+inf'),
  tonumber(c[3] or 0), tonumber(c[4] or 0),
}
`;

/**
 * Frees what no longer matters, a bounded amount per call: ended leases from the count,
 * idle sessions, (proxy, target) entries whose cooldown ended and whose streak and window
 * went cold, and suspicions past their deadline. Correctness never waits for it.
 */
const SWEEP = String.raw`
redis.call('ZREMRANGEBYSCORE', K_LEASES, '-inf', NOW)
prune_sessions(1000)
prune_suspicions(1000)
local cold = redis.call('ZRANGEBYSCORE', K_TARGETS, '-inf', NOW - BAN_MAX - WINDOW, 'LIMIT', 0, 1000)
for _, m in ipairs(cold) do
  local sep = string.find(m, '\0', 1, true)
  forget_target(string.sub(m, 1, sep - 1), string.sub(m, sep + 1))
end
return #cold
`;

export interface LuaScript {
  readonly name: string;
  readonly source: string;
}

function script(name: string, body: string): LuaScript {
  return { name, source: PRELUDE + body };
}

export const SCRIPTS = {
  acquire: script('acquire', ACQUIRE),
  renew: script('renew', RENEW),
  release: script('release', RELEASE),
  report: script('report', REPORT),
  observe: script('observe', OBSERVE),
  get: script('get', GET),
  endSession: script('endSession', END_SESSION),
  totals: script('totals', TOTALS),
  sweep: script('sweep', SWEEP),
} as const;

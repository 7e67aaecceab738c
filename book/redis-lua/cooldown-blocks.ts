// Helper blocks of the per-target cooldowns: a proxy's target entries and their caps.

import type { Block, BlockName } from './script-parts.js';

export const COOLDOWN_BLOCKS = {
  entries: {
    needs: ['oldest'],
    lua: String.raw`
local function k_tgt(id) return P .. ':tgt:' .. id end
-- (proxy, target)'s cooldown end, the score of its P:targets member, as a string key: the
-- acquire reads a chunk's in its one MGET.
local function k_cd(id, target) return P .. ':cd:' .. id .. '\0' .. target end
-- The registry's proxies cooling down for a target, by cooldown end (the fleet's counts);
-- those of class c (proxy-classes.ts) for it.
local function k_cdt(target) return P .. ':cdt:' .. target end
local function k_ccdt(c, target) return P .. ':ccdt:' .. c .. ':' .. target end
-- A registry entry's class ("cap h1 h2 class x<exit>", both optional), or nil.
local function class_in(reg) return reg and string.match(reg, '^%S+ %S+ %S+ (%x+)') end
-- The registry's proxies with an exit cooling down for a target, by exit ("key:id", lex).
local function k_xcd(target) return P .. ':xcd:' .. target end
-- A registry member's place in the exit sets ("key:id"), or nil without an exit.
local function exit_in(reg, id)
  local x = reg and string.match(reg, ' x(%x+)$')
  return x and (x .. ':' .. id)
end
-- The registry's proxies with a class and an exit cooling down for a target ("class:key:id", lex).
local function k_cxcd(target) return P .. ':cxcd:' .. target end
-- A registry member's place in the by-class exit sets ("class:key:id"), or nil without both.
local function cexit_in(reg, id)
  local c = class_in(reg)
  local m = c and exit_in(reg, id)
  return m and (c .. ':' .. m)
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
  if redis.call('ZREM', k_cdt(target), id) == 1 then
    local reg = redis.call('HGET', K_FLEET, id)
    local c = class_in(reg)
    if c then redis.call('ZREM', k_ccdt(c, target), id) end
    local m = exit_in(reg, id)
    if m then redis.call('ZREM', k_xcd(target), m) end
    local cm = cexit_in(reg, id)
    if cm then redis.call('ZREM', k_cxcd(target), cm) end
  end
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
  -- Counted for the target while the proxy is in the registry (the fleet script adds the
  -- running ones of a proxy that joins it).
  local reg = redis.call('HGET', K_FLEET, id)
  if reg then
    redis.call('ZADD', k_cdt(target), score, id)
    keep(k_cdt(target), RETAIN)
    local c = class_in(reg)
    if c then
      redis.call('ZADD', k_ccdt(c, target), score, id)
      keep(k_ccdt(c, target), RETAIN)
    end
    local m = exit_in(reg, id)
    if m then
      redis.call('ZADD', k_xcd(target), 0, m)
      keep(k_xcd(target), RETAIN)
      if c then
        redis.call('ZADD', k_cxcd(target), 0, c .. ':' .. m)
        keep(k_cxcd(target), RETAIN)
      end
    end
  end
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
} satisfies Partial<Record<BlockName, Block>>;

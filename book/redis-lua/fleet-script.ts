// The fleet registry's script: a replica's leasable proxies and their caps, told to the book
// so that a refusal is known from counts instead of a walk (issue 47 item 4).

import type { Body, ScriptName } from './script-parts.js';

/**
 * ARGV after now: count, then per proxy its id, its cap ('0': not leasable, out of the
 * registry), its two hashes (fleet-fingerprint.ts's memberHash of id, cap, class and exit),
 * its class (classID; '' with cap '0') and its exit key (exit-ip-match.ts's exitKey; '':
 * none known). Every replica sends what its catalog shows; an entry
 * already as sent changes nothing. Keeps the counts' sets to registry members: a proxy that
 * joins brings its running cooldowns (P:cdt:<target>), its hold (P:held) and, when its live
 * leases fill its cap, its P:full mark; one that leaves takes them with it; a raised cap ends
 * its P:full mark (a lowered one leaves it: still full). Each class's sets (P:cfull:<c>,
 * P:cheld:<c>, P:ccdt:<c>:<target>) hold the marks of its members, and P:class-sum its
 * figures: a member that changes class takes its marks along. The exit sets (P:xip,
 * P:xfull, P:xcd:<target>, by "exit:id" in lex order) hold the members with an exit and
 * those of them marked full or cooling, the same way, and their by-class twins (P:cxip,
 * P:cxfull, P:cxcd:<target>, by "class:exit:id") the same per class: a new exit or class moves them. Answers {count, a, b}: the
 * registry's fingerprint after.
 */
const FLEET = String.raw`
local s = redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
local cnt, fa, fb = tonumber(s[1] or 0), tonumber(s[2] or 0), tonumber(s[3] or 0)
-- Class c's figures with a member's hashes in (d = 1) or out (d = -1).
local function class_sum(c, d, h1, h2)
  if c == '' then return end
  local v = redis.call('HGET', K_CLASS_SUM, c)
  local n, a, b = 0, 0, 0
  if v then
    local x, y, z = string.match(v, '^(%S+) (%S+) (%S+)$')
    n, a, b = tonumber(x), tonumber(y), tonumber(z)
  end
  n, a, b = n + d, bit.bxor(a, tonumber(h1)), bit.bxor(b, tonumber(h2))
  if n <= 0 then
    redis.call('HDEL', K_CLASS_SUM, c)
  else
    redis.call('HSET', K_CLASS_SUM, c, int(n) .. ' ' .. int(a) .. ' ' .. int(b))
  end
end
-- A member's marks copied from the registry's sets into class c's (copy), or taken out of c's.
local function class_marks(id, c, copy)
  if c == '' then return end
  local marks = { { K_FULL, P .. ':cfull:' .. c }, { K_HELD, P .. ':cheld:' .. c } }
  for _, target in ipairs(redis.call('ZRANGE', P .. ':tord:' .. id, 0, -1)) do
    marks[#marks + 1] = { k_cdt(target), k_ccdt(c, target), true }
  end
  for _, m in ipairs(marks) do
    if not copy then
      redis.call('ZREM', m[2], id)
    else
      local score = redis.call('ZSCORE', m[1], id)
      if score then
        redis.call('ZADD', m[2], score, id)
        if m[3] then keep(m[2], RETAIN) end
      end
    end
  end
end
-- A member's exit marks (P:xip, P:xfull, P:xcd:<target>: "x:id", lex; with class c, their
-- by-class twins P:cxip, P:cxfull, P:cxcd:<target>: "c:x:id") made from its registry marks
-- (copy), or taken out.
local function exit_marks(id, c, x, copy)
  if x == '' then return end
  local m = x .. ':' .. id
  local cm = c ~= '' and (c .. ':' .. m)
  local targets = redis.call('ZRANGE', P .. ':tord:' .. id, 0, -1)
  if not copy then
    redis.call('ZREM', K_XIP, m)
    redis.call('ZREM', K_XFULL, m)
    for _, target in ipairs(targets) do redis.call('ZREM', k_xcd(target), m) end
    if cm then
      redis.call('ZREM', K_CXIP, cm)
      redis.call('ZREM', K_CXFULL, cm)
      for _, target in ipairs(targets) do redis.call('ZREM', k_cxcd(target), cm) end
    end
    return
  end
  redis.call('ZADD', K_XIP, 0, m)
  if cm then redis.call('ZADD', K_CXIP, 0, cm) end
  if redis.call('ZSCORE', K_FULL, id) then
    redis.call('ZADD', K_XFULL, 0, m)
    if cm then redis.call('ZADD', K_CXFULL, 0, cm) end
  end
  for _, target in ipairs(targets) do
    if redis.call('ZSCORE', k_cdt(target), id) then
      redis.call('ZADD', k_xcd(target), 0, m)
      keep(k_xcd(target), RETAIN)
      if cm then
        redis.call('ZADD', k_cxcd(target), 0, cm)
        keep(k_cxcd(target), RETAIN)
      end
    end
  end
end
for i = 1, tonumber(ARGV[A + 1]) do
  local b = A + 1 + 6 * (i - 1)
  local id, cap, c, x = ARGV[b + 1], ARGV[b + 2], ARGV[b + 5] or '', ARGV[b + 6] or ''
  local new
  if cap ~= '0' then
    new = cap .. ' ' .. ARGV[b + 3] .. ' ' .. ARGV[b + 4]
    if c ~= '' then new = new .. ' ' .. c end
    if x ~= '' then new = new .. ' x' .. x end
  end
  local old = redis.call('HGET', K_FLEET, id)
  if old ~= new then
    local was, oc, ox
    if old then
      local ocap, o1, o2 = string.match(old, '^(%S+) (%S+) (%S+)')
      was, oc, ox = tonumber(ocap), string.match(old, '^%S+ %S+ %S+ (%x+)') or '', string.match(old, ' x(%x+)$') or ''
      cnt, fa, fb = cnt - 1, bit.bxor(fa, tonumber(o1)), bit.bxor(fb, tonumber(o2))
      class_sum(oc, -1, o1, o2)
      if new == nil or oc ~= c then class_marks(id, oc, false) end
      if new == nil or ox ~= x or oc ~= c then exit_marks(id, oc, ox, false) end
    end
    local tord = P .. ':tord:' .. id
    if new then
      redis.call('HSET', K_FLEET, id, new)
      cnt, fa, fb = cnt + 1, bit.bxor(fa, tonumber(ARGV[b + 3])), bit.bxor(fb, tonumber(ARGV[b + 4]))
      class_sum(c, 1, ARGV[b + 3], ARGV[b + 4])
      if was == nil then
        local running = redis.call('ZRANGEBYSCORE', tord, '(' .. int(NOW), '+inf', 'WITHSCORES')
        for j = 1, #running, 2 do
          redis.call('ZADD', k_cdt(running[j]), running[j + 1], id)
          keep(k_cdt(running[j]), RETAIN)
        end
        held_mark(id, hold_get(id))
        -- Full already (it left the registry and came back with its leases): marked again.
        local load, first = load_of(id, redis.call('GET', k_ld(id)))
        if load > 0 and first and load >= tonumber(cap) then redis.call('ZADD', K_FULL, first, id) end
      elseif tonumber(cap) > was then
        redis.call('ZREM', K_FULL, id)
        redis.call('ZREM', P .. ':cfull:' .. c, id)
        if x ~= '' then redis.call('ZREM', K_XFULL, x .. ':' .. id) end
        if x ~= '' and c ~= '' then redis.call('ZREM', K_CXFULL, c .. ':' .. x .. ':' .. id) end
      end
      if was == nil or oc ~= c then class_marks(id, c, true) end
      if was == nil or ox ~= x or oc ~= c then exit_marks(id, c, x, true) end
    else
      redis.call('HDEL', K_FLEET, id)
      redis.call('ZREM', K_FULL, id)
      redis.call('ZREM', K_HELD, id)
      for _, target in ipairs(redis.call('ZRANGE', tord, 0, -1)) do redis.call('ZREM', k_cdt(target), id) end
    end
  end
end
redis.call('HSET', K_FLEET_SUM, 'n', int(cnt), 'a', int(fa), 'b', int(fb))
return { cnt, fa, fb }
`;

/**
 * Reads only, for a replica's sweep: ARGV after now: 'sum' (the registry's count, a, b) or
 * 'all' (its members, flat: id, "cap h1 h2 class", ...).
 */
const FLEET_READ = String.raw`
if ARGV[A + 1] == 'all' then return redis.call('HGETALL', K_FLEET) end
return redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
`;

export const FLEET_BODIES = {
  fleet: { needs: ['now', 'int', 'keep', 'entries', 'holds', 'loads'], body: FLEET },
  fleetRead: { needs: [], body: FLEET_READ },
} satisfies Partial<Record<ScriptName, Body>>;

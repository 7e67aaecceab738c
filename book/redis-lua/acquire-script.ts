// The acquire script: the claim of the best candidate under its cap, or why none could take it.

import type { Body, ScriptName } from './script-parts.js';

/**
 * Leases a proxy. ARGV after now: leaseID, ttlSeconds, the lease key's life in ms (ttl plus
 * a minute), candidate count, the owner's lease quota ('' = none; beyond it the answer is
 * quota, the owner's live leases), then per candidate in the replica's (latency, id) order (its
 * place there is its rank): id, maxLeases, record JSON; then, left out from the last one
 * that has its default on (redis-book-codec.ts's acquireArgs): target ('' = global pool),
 * selector JSON ('{}'), session (''), session mode ('check' | 'moved' | 'none'), a bound
 * proxy the replica knows is not leasable for this request (''), the request key ('':
 * none; a key granted before answers dup, its lease id and stored value). Answers one string of
 * \0-separated fields (one bulk reply: a nested reply of ~15 elements cost the client ~10 µs
 * more to decode, docs/benchmarks.md; the codec's decodeAcquireReply reads it): ok, proxyID,
 * now, expiresAt, moved, load, hints, then the statistics slots; or need, boundProxyID (the
 * session's proxy was not among the candidates); or none, leasable, cooling, moved, ms until
 * the first cooldown among them ends (-1: none), hints, whole ('1': the counts are the whole
 * fleet's, from the registry: the walk ends here; ARGV after the request key: the replica's
 * fleet fingerprint, count, a, b, for a request without selector, exit IP or scope (a
 * session's too); or, for one with a selector or a scope, three empty fields then
 * the ids of the classes it matches, comma-separated, and the replica's figures of their
 * union "count a b": redis-fleet-feed.ts, redis-book-codec.ts's unionFigures; with an exit IP
 * too, then the keys of its block's first and last addresses and each class's count of
 * members with an exit, comma-separated); or, for one by
 * exit IP without selector or scope, the fleet fingerprint, two empty fields, then the keys of
 * the block's first and last addresses (exit-ip-match.ts's blockKeys). Hints: "i:load" for each candidate
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
-- Ended marks an exit-IP refusal takes out before counting, at most (more: the walk).
local EXIT_STALE = 64
local ARGV = ARGV
local lease_id = ARGV[A + 1]
local ttl = ARGV[A + 2]
local n = tonumber(ARGV[A + 4])
local quota = ARGV[A + 5]
-- Candidate i's fields: id ARGV[B + 3i - 2], maxLeases B + 3i - 1, record B + 3i.
local B = A + 5
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

-- The token's lease quota (tenant-quotas.ts), judged here: one count for every replica and
-- both doors. P:tl:<owner> holds the owner's leases (lease key -> expiry; the owner is the
-- key's prefix, lease-owner.ts). Counting prunes, only at the quota: a token under it pays
-- one ZCARD, and its set never holds more than its quota of leases, ended ones included.
local tl, owned
if quota ~= '' then
  tl = P .. ':tl:' .. string.match(lease_id, '^([^.]*)')
  owned = redis.call('ZCARD', tl)
  if owned >= tonumber(quota) then
    redis.call('ZREMRANGEBYSCORE', tl, '-inf', NOW_S or string.format('%d', NOW))
    -- A lease released through a replica that keeps no count (an older one, in a rolling
    -- update) has no lease key any more. One EXISTS for them all.
    local ids = redis.call('ZRANGE', tl, 0, -1)
    owned = #ids
    local lk = {}
    for i = 1, owned do lk[i] = P .. ':lease:' .. ids[i] end
    if owned >= tonumber(quota) and redis.call('EXISTS', unpack(lk)) < owned then
      for i = 1, owned do
        if redis.call('EXISTS', lk[i]) == 0 then redis.call('ZREM', tl, ids[i]) end
      end
      owned = redis.call('ZCARD', tl)
    end
    if owned >= tonumber(quota) then return 'quota\0' .. owned end
  end
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
  -- (Refusals only: no closure on a grant's path.) Takes out ended marks (ids, from key) with their class's, exit and by-class exit twins:
  -- an exit-IP refusal counts only running ones (each once: a cost of the lease or the report
  -- that made it).
  local function unmark(ids, key, xkey, cxkey, cpre)
    for i = 1, math.min(#ids, EXIT_STALE) do
      local id = ids[i]
      local reg = redis.call('HGET', K_FLEET, id) or ''
      redis.call('ZREM', key, id)
      local c = string.match(reg, '^%S+ %S+ %S+ (%x+)')
      if c then redis.call('ZREM', cpre(c), id) end
      local x = string.match(reg, ' x(%x+)$')
      if x then redis.call('ZREM', xkey, x .. ':' .. id) end
      if x and c then redis.call('ZREM', cxkey, c .. ':' .. x .. ':' .. id) end
    end
  end
  -- The ended full marks and the target's ended cooldown marks taken out, at most EXIT_STALE
  -- of each; answers whether none was left (else the walk).
  local function unmark_ended()
    local ck = P .. ':cdt:' .. target
    local ended_full = redis.call('ZRANGE', K_FULL, '-inf', NOW, 'BYSCORE', 'LIMIT', 0, EXIT_STALE + 1)
    local ended_cd = redis.call('ZRANGE', ck, '-inf', NOW, 'BYSCORE', 'LIMIT', 0, EXIT_STALE + 1)
    -- Taken out even when more are left (the walk then): the next refusal finds fewer.
    unmark(ended_full, K_FULL, K_XFULL, K_CXFULL, function(c) return P .. ':cfull:' .. c end)
    unmark(ended_cd, ck, P .. ':xcd:' .. target, P .. ':cxcd:' .. target,
      function(c) return P .. ':ccdt:' .. c .. ':' .. target end)
    return #ended_full <= EXIT_STALE and #ended_cd <= EXIT_STALE
  end

  if first_end >= 0 then wait = first_end - NOW end
  -- The fleet's counts, when the replica sent its fingerprint (a request without selector,
  -- exit IP or scope: its candidates are all its leasable proxies) and the
  -- registry's equals it, with no registry proxy held: every one of them cooling down for
  -- the target, or certainly full, is the refusal of the whole walk, known now ('whole').
  local whole = '0'
  local fp = ARGV[T + 7]
  local first_x = ARGV[T + 12] or ''
  if fp and fp ~= '' and first_x ~= '' then
    -- A request by exit IP (no selector nor scope): its block's keys. The fingerprint covers
    -- each member's exit (fleet-fingerprint.ts), so while it is the book's the registry's
    -- members in the block are the replica's candidates; counted in the exit sets (lex
    -- ranges, O(log n)) after their ended marks are taken out (each once: a cost of the lease
    -- or the report that made it, at most EXIT_STALE here, else the walk).
    local s = redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
    if s[1] == fp and s[2] == ARGV[T + 8] and s[3] == ARGV[T + 9] and
      redis.call('ZCOUNT', K_HELD, '(' .. NOW, '+inf') == 0 then
      local lo, hi = '[' .. first_x, '(' .. ARGV[T + 13] .. ';'
      local size = redis.call('ZLEXCOUNT', K_XIP, lo, hi)
      local ck, xk = P .. ':cdt:' .. target, P .. ':xcd:' .. target
      local clean = unmark_ended() and size > 0
      if clean then
        local c = redis.call('ZLEXCOUNT', xk, lo, hi)
        if c >= size or redis.call('ZLEXCOUNT', K_XFULL, lo, hi) >= size then
          leasable, cooling, whole = size, c, '1'
          wait = -1
          -- The first of the target's cooldowns to end, the block's or not: never after the
          -- block's first (a retry that early is refused again, never one that late).
          if c > 0 then
            local first = redis.call('ZRANGE', ck, '(' .. NOW, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
            wait = tonumber(first[2]) - NOW
          end
        end
      end
    end
  elseif fp and fp ~= '' then
    local s = redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
    if s[1] == fp and s[2] == ARGV[T + 8] and s[3] == ARGV[T + 9] and
      redis.call('ZCOUNT', K_HELD, '(' .. NOW, '+inf') == 0 then
      local size = tonumber(fp)
      local ck = P .. ':cdt:' .. target
      local c = redis.call('ZCOUNT', ck, '(' .. NOW, '+inf')
      if c >= size or redis.call('ZCOUNT', K_FULL, '(' .. NOW, '+inf') >= size then
        leasable, cooling, whole = size, c, '1'
        wait = -1
        if c > 0 then
          local first = redis.call('ZRANGE', ck, '(' .. NOW, '+inf', 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
          wait = tonumber(first[2]) - NOW
        end
      end
    end
  elseif (ARGV[T + 10] or '') ~= '' then
    -- A request with a selector or a scope: the ids of the classes it matches
    -- (proxy-classes.ts) and the replica's figures of their union. The book's union equal,
    -- no member of them held, and every member cooling down for the target, or every one
    -- certainly full: the refusal of the whole walk, at a cost of the classes, whatever
    -- their sizes.
    local ids, sizes = {}, {}
    for c in string.gmatch(ARGV[T + 10], '[^,]+') do ids[#ids + 1] = c end
    local k = #ids
    local sums = redis.call('HMGET', K_CLASS_SUM, unpack(ids))
    local size, ua, ub, same = 0, 0, 0, true
    for j = 1, k do
      if not sums[j] then
        same = false
        break
      end
      local n, a, b = string.match(sums[j], '^(%d+) (%d+) (%d+)$')
      sizes[j] = tonumber(n)
      size, ua, ub = size + sizes[j], bit.bxor(ua, tonumber(a)), bit.bxor(ub, tonumber(b))
    end
    same = same and (size .. ' ' .. ua .. ' ' .. ub) == ARGV[T + 11]
    -- Held: the registry's set first (most often empty), then each class's.
    if same and redis.call('ZCOUNT', K_HELD, '(' .. NOW, '+inf') > 0 then
      for j = 1, k do
        if redis.call('ZCOUNT', P .. ':cheld:' .. ids[j], '(' .. NOW, '+inf') > 0 then
          same = false
          break
        end
      end
    end
    if same and first_x ~= '' then
      -- With an exit-IP block: the classes' members in it, counted in the by-class exit sets
      -- (P:cxip, P:cxfull, P:cxcd:<target>: "class:key:id", lex) over each class's range of
      -- the block, after the ended marks are taken out (as a block alone's). Each class's
      -- members with an exit, as the replica counts them (ARGV[T + 14]), must be P:cxip's
      -- (a set an older replica did not keep: the walk); none of them in the block, no_match.
      local exits = {}
      for e in string.gmatch(ARGV[T + 14] or '', '[^,]+') do exits[#exits + 1] = e end
      local kept = #exits == k
      for i = 1, kept and k or 0 do
        if redis.call('ZLEXCOUNT', K_CXIP, '[' .. ids[i] .. ':', '(' .. ids[i] .. ';') ~= tonumber(exits[i]) then
          kept = false
          break
        end
      end
      if kept and unmark_ended() then
        local xk, size, c, f = P .. ':cxcd:' .. target, 0, 0, 0
        for i = 1, k do
          local lo, hi = '[' .. ids[i] .. ':' .. first_x, '(' .. ids[i] .. ':' .. ARGV[T + 13] .. ';'
          size = size + redis.call('ZLEXCOUNT', K_CXIP, lo, hi)
          c = c + redis.call('ZLEXCOUNT', xk, lo, hi)
          f = f + redis.call('ZLEXCOUNT', K_CXFULL, lo, hi)
        end
        if size == 0 or c >= size or f >= size then
          leasable, cooling, whole = size, c, '1'
          wait = -1
          -- The first of the target's cooldowns to end, these members' or not: never after theirs.
          if c > 0 then
            local first = redis.call('ZRANGE', P .. ':cdt:' .. target, '(' .. NOW, '+inf', 'BYSCORE', 'LIMIT', 0, 1,
              'WITHSCORES')
            wait = tonumber(first[2]) - NOW
          end
        end
      end
    elseif same then
      local c, all_cool, all_full = 0, true, true
      for j = 1, k do
        if all_cool then
          local cj = redis.call('ZCOUNT', P .. ':ccdt:' .. ids[j] .. ':' .. target, '(' .. NOW, '+inf')
          c = c + cj
          all_cool = cj >= sizes[j]
        end
        if all_full then
          all_full = redis.call('ZCOUNT', P .. ':cfull:' .. ids[j], '(' .. NOW, '+inf') >= sizes[j]
        end
        if not (all_cool or all_full) then break end
      end
      if all_cool or all_full then
        leasable, cooling, whole = size, c, '1'
        wait = -1
        -- All cooling down: when the first of them ends (all full: no cooldown frees one).
        for j = 1, all_cool and k or 0 do
          local first = redis.call('ZRANGE', P .. ':ccdt:' .. ids[j] .. ':' .. target, '(' .. NOW, '+inf',
            'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
          local e = tonumber(first[2]) - NOW
          if wait < 0 or e < wait then wait = e end
        end
      end
    end
  end
  return 'none\0' .. leasable .. '\0' .. cooling .. '\0' .. (moved and '1' or '0') .. '\0' .. wait .. '\0' ..
    string.sub(hints, 2) .. '\0' .. whole
end

local id = ARGV[B + 3 * chosen - 2]
local exp = NOW + tonumber(ttl) * 1000
local exp_s = string.format('%d', exp)
local now_s = NOW_S or string.format('%d', NOW)
-- The address field stays empty: readers take it from the record (leases block's addr_of).
local value = id .. '\0\0' .. ttl .. '\0' .. now_s .. '\0' .. exp_s .. '\0' ..
  target .. '\0' .. (ARGV[T + 2] or '{}') .. '\0' .. ARGV[B + 3 * chosen] .. '\0' .. session
redis.call('SET', P .. ':lease:' .. lease_id, value, 'PX', ARGV[A + 3])
if tl then
  redis.call('ZADD', tl, exp_s, lease_id)
  -- A new set has no TTL for GT to compare with.
  if owned == 0 then redis.call('PEXPIRE', tl, ARGV[A + 3]) else redis.call('PEXPIRE', tl, ARGV[A + 3], 'GT') end
end
if rk ~= '' then redis.call('SET', P .. ':req:' .. rk, lease_id .. '\0' .. value, 'PX', REQ_RETAIN) end
redis.call('ZADD', P .. ':load:' .. id, exp_s, lease_id)
local v = got[chosen]
local now_load = '1'
local f
-- The earliest expiry among the proxy's leases after this one (for P:full), a lower bound.
local first_exp = exp
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
    -- Without e (load keys not as written together) no bound is known: not marked.
    if load[chosen] > 0 then first_exp = e and math.min(tonumber(e), exp) end
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
-- Full at the cap the registry knows (the fleet's counts): certainly so until first_exp.
if first_exp and load[chosen] + 1 >= tonumber(ARGV[B + 3 * chosen - 1]) then
  local reg = redis.call('HGET', K_FLEET, id)
  if reg and load[chosen] + 1 >= tonumber(string.match(reg, '^%S+')) then
    redis.call('ZADD', K_FULL, first_exp, id)
    local c = string.match(reg, '^%S+ %S+ %S+ (%x+)')
    if c then redis.call('ZADD', P .. ':cfull:' .. c, first_exp, id) end
    local x = string.match(reg, ' x(%x+)$')
    if x then redis.call('ZADD', K_XFULL, 0, x .. ':' .. id) end
    if x and c then redis.call('ZADD', K_CXFULL, 0, c .. ':' .. x .. ':' .. id) end
  end
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

export const ACQUIRE_BODIES = {
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
} satisfies Partial<Record<ScriptName, Body>>;

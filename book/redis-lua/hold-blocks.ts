// Helper blocks of the holds of suspect or down proxies and the running suspicions.

import type { Block, BlockName } from './script-parts.js';

export const HOLD_BLOCKS = {
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

-- Marks a registry proxy held in P:held until its hold may end (a suspicion's deadline; a
-- down hold: its key's life), or unmarks it: the fleet's counts are trusted only while no
-- registry proxy is held. Over-marking (a down hold on an old address) only costs a walk.
-- Its class's set (P:cheld:<c>) follows.
local function held_mark(id, h)
  local ends
  if h.da ~= nil then ends = NOW + RETAIN end
  if h.sa ~= nil and h.su > NOW and (ends == nil or h.su > ends) then ends = h.su end
  local reg = redis.call('HGET', K_FLEET, id)
  local c = reg and string.match(reg, '^%S+ %S+ %S+ (%x+)')
  if ends ~= nil and reg then
    redis.call('ZADD', K_HELD, ends, id)
    if c then redis.call('ZADD', P .. ':cheld:' .. c, ends, id) end
  else
    redis.call('ZREM', K_HELD, id)
    if c then redis.call('ZREM', P .. ':cheld:' .. c, id) end
  end
end

local function hold_put(id, h)
  held_mark(id, h)
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
} satisfies Partial<Record<BlockName, Block>>;

// Helper blocks of leases: their values, a proxy's load keys, request keys, one release.

import type { Block, BlockName } from './script-parts.js';

export const LEASE_BLOCKS = {
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
  -- Out of its token's lease count (the acquire's quota), kept where the owner prefixes the key.
  local owner = string.match(id, '^([^.]+)%.')
  if owner then redis.call('ZREM', P .. ':tl:' .. owner, id) end
  local proxy = string.sub(v, 1, string.find(v, '\0', 1, true) - 1)
  if redis.call('ZREM', P .. ':load:' .. proxy, id) == 0 then return proxy .. '\0-1' end
  redis.call('HINCRBY', K_COUNTERS, 'freed', 1)
  redis.call('PEXPIRE', K_COUNTERS, 30 * 24 * 3600 * 1000)
  -- A slot freed: no longer certainly full (the fleet's counts), nor in its class's set.
  if redis.call('ZREM', K_FULL, proxy) == 1 then
    local reg = redis.call('HGET', K_FLEET, proxy) or ''
    local c = string.match(reg, '^%S+ %S+ %S+ (%x+)')
    if c then redis.call('ZREM', P .. ':cfull:' .. c, proxy) end
    local x = string.match(reg, ' x(%x+)$')
    if x then redis.call('ZREM', K_XFULL, x .. ':' .. proxy) end
    if x and c then redis.call('ZREM', K_CXFULL, c .. ':' .. x .. ':' .. proxy) end
  end
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
} satisfies Partial<Record<BlockName, Block>>;

// Helper blocks most scripts share: the clock, integers, counters, P:ld flags, statistics slots.

import type { Block, BlockName } from './script-parts.js';

export const COMMON_BLOCKS = {
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
} satisfies Partial<Record<BlockName, Block>>;

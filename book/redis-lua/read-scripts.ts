// The scripts that read the book: proxies' usage and standing, the whole book's totals; and its sweep.

import type { Body, ScriptName } from './script-parts.js';

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
-- Ended full marks, with their exit sets' twins (P:xfull mirrors P:full's members).
local ended = redis.call('ZRANGE', K_FULL, '-inf', NOW, 'BYSCORE', 'LIMIT', 0, 1000)
for _, id in ipairs(ended) do
  local reg = redis.call('HGET', K_FLEET, id) or ''
  local x = string.match(reg, ' x(%x+)$')
  if x then redis.call('ZREM', K_XFULL, x .. ':' .. id) end
  local c = string.match(reg, '^%S+ %S+ %S+ (%x+)')
  if x and c then redis.call('ZREM', K_CXFULL, c .. ':' .. x .. ':' .. id) end
  redis.call('ZREM', K_FULL, id)
end
redis.call('ZREMRANGEBYSCORE', K_HELD, '-inf', NOW)
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

export const READ_BODIES = {
  totals: { needs: ['now', 'suspicions'], body: TOTALS },
  sweep: { needs: ['sessions', 'suspicions', 'targets'], body: SWEEP },
  usage: { needs: ['now', 'int'], body: USAGE },
  standing: { needs: ['now', 'int'], body: STANDING },
} satisfies Partial<Record<ScriptName, Body>>;

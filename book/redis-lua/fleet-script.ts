// The fleet registry's script: a replica's leasable proxies and their caps, told to the book
// so that a refusal is known from counts instead of a walk (issue 47 item 4).

import type { Body, ScriptName } from './script-parts.js';

/**
 * ARGV after now: count, then per proxy its id, its cap ('0': not leasable, out of the
 * registry) and its two hashes (fleet-fingerprint.ts's memberHash of id and cap). Every
 * replica sends what its catalog shows; an entry already as sent changes nothing. Keeps the
 * counts' sets to registry members: a proxy that joins brings its running cooldowns
 * (P:cdt:<target>), its hold (P:held) and, when its live leases fill its cap, its P:full
 * mark; one that leaves takes them with it; a raised cap ends its P:full mark (a lowered one
 * leaves it: still full). Answers {count, a,
 * b}: the registry's fingerprint after.
 */
const FLEET = String.raw`
local s = redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
local cnt, fa, fb = tonumber(s[1] or 0), tonumber(s[2] or 0), tonumber(s[3] or 0)
for i = 1, tonumber(ARGV[A + 1]) do
  local b = A + 1 + 4 * (i - 1)
  local id, cap = ARGV[b + 1], ARGV[b + 2]
  local new
  if cap ~= '0' then new = cap .. ' ' .. ARGV[b + 3] .. ' ' .. ARGV[b + 4] end
  local old = redis.call('HGET', K_FLEET, id)
  if old ~= new then
    local was
    if old then
      local oc, o1, o2 = string.match(old, '^(%S+) (%S+) (%S+)$')
      was = tonumber(oc)
      cnt, fa, fb = cnt - 1, bit.bxor(fa, tonumber(o1)), bit.bxor(fb, tonumber(o2))
    end
    local tord = P .. ':tord:' .. id
    if new then
      redis.call('HSET', K_FLEET, id, new)
      cnt, fa, fb = cnt + 1, bit.bxor(fa, tonumber(ARGV[b + 3])), bit.bxor(fb, tonumber(ARGV[b + 4]))
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
      end
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
 * 'all' (its members, flat: id, "cap h1 h2", ...).
 */
const FLEET_READ = String.raw`
if ARGV[A + 1] == 'all' then return redis.call('HGETALL', K_FLEET) end
return redis.call('HMGET', K_FLEET_SUM, 'n', 'a', 'b')
`;

export const FLEET_BODIES = {
  fleet: { needs: ['now', 'int', 'keep', 'entries', 'holds', 'loads'], body: FLEET },
  fleetRead: { needs: [], body: FLEET_READ },
} satisfies Partial<Record<ScriptName, Body>>;

// The scripts of a lease after its grant: renew, release, get; and the end of a session.

import type { Body, ScriptName } from './script-parts.js';

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
local life = int(math.ceil(exp - NOW + 60000))
redis.call('SET', k_lease(id), v, 'PX', life)
-- Its token's lease count (the acquire's quota) follows the new expiry; a lease an older
-- replica granted (a rolling update) joins it here.
local owner = string.match(id, '^([^.]+)%.')
if owner then
  local tl = P .. ':tl:' .. owner
  redis.call('ZADD', tl, exp_s, id)
  if redis.call('PTTL', tl) < tonumber(life) then redis.call('PEXPIRE', tl, life) end
end
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

export const LEASE_BODIES = {
  renew: { needs: ['now', 'holds', 'sessions', 'leases', 'loads', 'statsRaw', 'requests'], body: RENEW },
  release: { needs: ['releaseOne'], body: RELEASE },
  get: { needs: ['leases'], body: GET },
  endSession: { needs: [], body: END_SESSION },
} satisfies Partial<Record<ScriptName, Body>>;

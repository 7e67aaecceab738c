// The scripts of suspicion and holds: the health engine's observations, the running suspicions.

import type { Body, ScriptName } from './script-parts.js';

/**
 * ARGV after now: proxyID, kind (probe_passed | down | up | catalog), address, the
 * suspicion's token (probe_passed: its ss, as the probe request carried it) / healthy.
 */
const OBSERVE = String.raw`
local id = ARGV[A + 1]
local kind = ARGV[A + 2]
local addr = ARGV[A + 3]
local h = hold_get(id)
expire_suspicion(id, h)
if kind == 'probe_passed' then
  -- The recheck answered this very suspicion: a token, never a time from another clock.
  if h.sa == addr and tonumber(ARGV[A + 4]) == h.ss then
    clear_suspicion(id, h)
    h.ca = addr
    h.ct = NOW
    count('freed')
  end
elseif kind == 'down' then
  h.da = addr
  if h.sa == addr then clear_suspicion(id, h) end
elseif kind == 'up' then
  if h.da == addr then
    h.da = nil
    count('freed')
  end
elseif kind == 'catalog' then
  -- The proxy moved to another address, or its status is healthy again (a replica saw it
  -- turn so): the down hold has served its purpose. Not when the status turns unhealthy:
  -- a replica whose cache lags would lease the dead proxy (proxy-holds.ts).
  if h.da ~= nil and (ARGV[A + 4] == '1' or h.da ~= addr) then
    h.da = nil
    count('freed')
  end
end
hold_put(id, h)
return 1
`;

/**
 * Reads only: the suspicions running now, for a probe-request listener that just
 * (re)subscribed (a PUBLISH made while it was away is lost). Answers id, address, token
 * triples, flat; at most 10,000 (running suspicions are few: each asks for a probe at once).
 */
const SUSPECTS = String.raw`
local out = {}
local ids = redis.call('ZRANGEBYSCORE', K_SUSPECTS, '(' .. int(NOW), '+inf', 'LIMIT', 0, 10000)
for _, id in ipairs(ids) do
  local v = redis.call('GET', k_hold(id))
  if v then
    local h = cjson.decode(v)
    if h.sa ~= nil and h.su > NOW then
      out[#out + 1] = id
      out[#out + 1] = h.sa
      out[#out + 1] = int(h.ss)
    end
  end
end
return out
`;

export const HOLD_BODIES = {
  observe: { needs: ['holds'], body: OBSERVE },
  suspects: { needs: ['now', 'int', 'held'], body: SUSPECTS },
} satisfies Partial<Record<ScriptName, Body>>;

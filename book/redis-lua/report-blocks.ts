// The helper block of one report: its statistics, cooldown, suspicion and reporter.

import type { Block, BlockName } from './script-parts.js';

export const REPORT_BLOCKS = {
  reportOne: {
    needs: ['now', 'int', 'keep', 'holds', 'targets', 'leases', 'statsAdd'],
    lua: String.raw`
-- Records one report on a live lease: id, result, target override ('\0' = the lease's),
-- retryAfterSeconds ('' = none), random (the jitter), the reporter's name and '1' when it is
-- trusted for rotation (ban-agreement.ts: kept in P:rep:<proxy>, field "target\0reporter" =
-- the end its report gave, '*' for the trusted mark). Answers "target\0cooldownUntil (-1
-- none, -2 not recorded at a cap; '+' before it: the report started the cooldown, none ran
-- for the pair)\0suspect (-1 n/a, 0, 1)\0probeRequested (-1, 0, 1)" and the lease value, or
-- false when the lease is unknown or ended.
local function report_one(id, result, target, retry_s, random, reporter, trusted)
  local f, v = live_lease(id)
  if not f then return false end
  if target == '\0' then target = f[6] end
  local retry_after = -1
  if retry_s ~= '' then retry_after = tonumber(retry_s) * 1000 end
  local proxy, addr = f[1], addr_of(f)
  stats_add(proxy, result)
  local ends, suspect, probe = -1, -1, -1
  local started = ''
  if result == 'unreachable' then
    local h = hold_get(proxy)
    expire_suspicion(proxy, h)
    if h.sa == addr then
      suspect, probe = 1, 0
    elseif h.ca == addr and NOW < h.ct + HOLDOFF then
      suspect, probe = 0, 0
    else
      h.sa = addr
      h.ss = NOW
      h.su = NOW + SUSPICION
      redis.call('ZADD', K_SUSPECTS, h.su, proxy)
      keep(K_SUSPECTS, RETAIN)
      count('suspicionsRaised')
      -- since: the suspicion's token, which a passing recheck hands back (OBSERVE).
      redis.call('PUBLISH', CHANNEL, cjson.encode({ proxyID = proxy, address = addr, since = h.ss }))
      suspect, probe = 1, 1
    end
    hold_put(proxy, h)
  else
    local before = tdecode(redis.call('HGET', k_tgt(proxy), target))
    if not before or math.max(before.u, before.ru) <= NOW then started = '+' end
    local r = target_report(proxy, target, result, retry_after, tonumber(random))
    if r == false then ends = -2 elseif r ~= nil then ends = r end
    if ends < 0 then started = '' end
    if ends >= 0 then
      local k_rep = P .. ':rep:' .. proxy
      redis.call('HSET', k_rep, target .. '\0' .. reporter, ends)
      if trusted == '1' then redis.call('HSET', k_rep, target .. '\0*', ends) end
      redis.call('PEXPIRE', k_rep, RETAIN)
      -- The reporter's running cooldowns (its cooldown quota: the report script's count).
      if reporter ~= '' then
        local tc = P .. ':tc:' .. reporter
        redis.call('ZADD', tc, 'GT', ends, proxy .. '\0' .. target)
        redis.call('PEXPIRE', tc, RETAIN)
      end
    end
  end
  return target .. '\0' .. started .. int(ends) .. '\0' .. suspect .. '\0' .. probe, v
end`,
  },
} satisfies Partial<Record<BlockName, Block>>;

// The scripts of reports and cooldowns: a call's reports, a proxy's new egress, a refusal's re-check.

import type { Body, ScriptName } from './script-parts.js';

/**
 * Several reports as one atomic step, in order. ARGV after now: request key ('' = none),
 * count, then per report 9 fields: leaseID, result, target override ('\0' = none),
 * retryAfterSeconds ('' = none), a random number in [0, 1) (the cooldown's jitter), the
 * reporter's name, '1' when it is trusted for rotation, '1' to release the lease after its
 * report, the reporter's cooldown quota ('' = none). A banned/rate_limited report that would
 * start a (proxy, target) cooldown beyond its reporter's quota (the pairs its reports keep
 * running, P:tc:<reporter>, the batch's own new ones counted) refuses the whole call, nothing
 * recorded: the answer is then the string "quota\0i", i the first such report. Else one string per report: "target\0cooldownUntil\0suspect\0probeRequested\0
 * released\0lease value" (report_one's fields; released -1 n/a, 1 ended), '' when the lease
 * is gone. A repeat of a request key answers the first answers, and '!' after them, and
 * records nothing.
 */
const REPORT = String.raw`
local rk = ARGV[A + 1]
local prior = recall(rk)
if prior then
  -- One element more than the reports: the replica's mark of a repeat.
  local first = cjson.decode(prior)
  first[#first + 1] = '!'
  return first
end
local n = tonumber(ARGV[A + 2])
-- The cooldown quota first (tenant-quotas.ts), for every replica and both doors at once.
local tc, running, new
for i = 1, n do
  local b = A + 2 + 9 * (i - 1)
  local quota, result, reporter = ARGV[b + 9], ARGV[b + 2], ARGV[b + 6]
  local f = quota ~= '' and reporter ~= '' and (result == 'banned' or result == 'rate_limited') and
    live_lease(ARGV[b + 1])
  if f then
    if tc ~= P .. ':tc:' .. reporter then
      tc, new = P .. ':tc:' .. reporter, {}
      redis.call('ZREMRANGEBYSCORE', tc, '-inf', int(NOW))
      running = redis.call('ZCARD', tc)
    end
    local pair = f[1] .. '\0' .. (ARGV[b + 3] == '\0' and f[6] or ARGV[b + 3])
    if not new[pair] and not redis.call('ZSCORE', tc, pair) then
      if running >= tonumber(quota) then return 'quota\0' .. i end
      running, new[pair] = running + 1, true
    end
  end
end
local out = {}
for i = 1, n do
  local b = A + 2 + 9 * (i - 1)
  local head, v = report_one(ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6], ARGV[b + 7])
  if not head then
    out[i] = ''
  else
    local released = '-1'
    -- After the report: the proxy's last outcome is in the book before its slot frees.
    if ARGV[b + 8] == '1' then released = release_one(ARGV[b + 1]) and '1' or '0' end
    out[i] = head .. '\0' .. released .. '\0' .. v
  end
end
if rk ~= '' then remember(rk, cjson.encode(out)) end
return out
`;

/**
 * The proxies' egresses as a replica's catalog shows them (egress.ts's egressStep, the same
 * rule): ARGV after now: count, then per proxy its id and egress ("exit <ip>" | "ip <ip>").
 * A renewed egress (same kind, another address) forgets the proxy's cooldowns and streaks.
 * Every replica sends what it sees: the first one that brings news acts, the rest find the
 * egress known. Answers {running cooldowns forgotten, then the ids whose egress was renewed}.
 */
const EGRESS = String.raw`
local n = tonumber(ARGV[A + 1])
local forgotten = 0
local renewed = {}
for i = 1, n do
  local id = ARGV[A + 2 * i]
  local seen = ARGV[A + 2 * i + 1]
  local known = redis.call('GET', k_egress(id))
  if known ~= seen then
    if known and string.match(known, '^%S+') == string.match(seen, '^%S+') then
      forgotten = forgotten + forget_proxy(id)
      renewed[#renewed + 1] = id
      count('freed')
    end
    redis.call('SET', k_egress(id), seen, 'PX', RETAIN)
  end
end
return { forgotten, unpack(renewed) }
`;

/**
 * Reads only: what a replica checks a remembered refusal against (refusal-memo.ts): the
 * book's clock and its count of freed slots and lifted holds. One TIME, one HGET: a
 * refusal answered again costs Redis this, whatever the fleet's size.
 */
const REFUSAL = String.raw`
return { NOW, redis.call('HGET', K_COUNTERS, 'freed') or '0' }
`;

export const REPORT_BODIES = {
  report: { needs: ['requests', 'reportOne', 'releaseOne'], body: REPORT },
  egress: { needs: ['now', 'targets'], body: EGRESS },
  refusal: { needs: ['now'], body: REFUSAL },
} satisfies Partial<Record<ScriptName, Body>>;

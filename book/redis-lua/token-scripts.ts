// The script of the clients' tokens: wrong ones counted per source address for every replica.

import type { Body, ScriptName } from './script-parts.js';

/**
 * ARGV after now: the source address, the rate (failures per second), the burst. One failed
 * authentication from the address, in a token bucket every replica takes from
 * (`P:fa:<address>`, "tokens at"): each failure costs one even past empty, down to -burst, so
 * attempts that raced past a replica's view of the count are paid for, and an address that
 * stops is free again within (burst + 1) / rate seconds. Answers the ms until the address may
 * fail again (0: now). The key lives until the bucket is full again.
 */
const FAILED_AUTH = String.raw`
local k = P .. ':fa:' .. ARGV[A + 1]
local rate, burst = tonumber(ARGV[A + 2]), tonumber(ARGV[A + 3])
local tokens = burst
local v = redis.call('GET', k)
if v then
  local sp = string.find(v, ' ', 1, true)
  tokens = math.min(burst, tonumber(string.sub(v, 1, sp - 1)) + (NOW - tonumber(string.sub(v, sp + 1))) * rate / 1000)
end
tokens = math.max(tokens - 1, -burst)
redis.call('SET', k, string.format('%.4f %d', tokens, NOW), 'PX', math.ceil((burst - tokens) * 1000 / rate) + 1000)
if tokens >= 1 then return 0 end
return math.ceil((1 - tokens) * 1000 / rate)
`;

export const TOKEN_BODIES = {
  failedAuth: { needs: ['now'], body: FAILED_AUTH },
} satisfies Partial<Record<ScriptName, Body>>;

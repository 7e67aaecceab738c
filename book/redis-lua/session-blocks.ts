// The helper block of sticky sessions: bindings and their idle expiry.

import type { Block, BlockName } from './script-parts.js';

export const SESSION_BLOCKS = {
  sessions: {
    needs: ['now', 'count'],
    lua: String.raw`
local function prune_sessions(limit)
  local idle = redis.call('ZRANGEBYSCORE', K_SESS_USED, '-inf', NOW - IDLE, 'LIMIT', 0, limit)
  for _, key in ipairs(idle) do
    redis.call('HDEL', K_SESS, key)
    redis.call('ZREM', K_SESS_USED, key)
  end
end

-- The proxy a live session is bound to; an idle-expired session is forgotten here.
local function bound_to(session)
  local bound = redis.call('HGET', K_SESS, session)
  if not bound then return nil end
  local used = redis.call('ZSCORE', K_SESS_USED, session)
  if not used or tonumber(used) + IDLE <= NOW then
    redis.call('HDEL', K_SESS, session)
    redis.call('ZREM', K_SESS_USED, session)
    return nil
  end
  return bound
end

-- known: the session is bound right now (bound_to said so), so the cap has room for it.
local function bind(session, id, known)
  if not known and redis.call('HEXISTS', K_SESS, session) == 0 and redis.call('HLEN', K_SESS) >= MAX_SESSIONS then
    prune_sessions(1000)
    if redis.call('HLEN', K_SESS) >= MAX_SESSIONS then
      local oldest = redis.call('ZPOPMIN', K_SESS_USED)
      if oldest[1] then redis.call('HDEL', K_SESS, oldest[1]) end
      count('sessionsEvicted')
    end
  end
  redis.call('HSET', K_SESS, session, id)
  redis.call('ZADD', K_SESS_USED, NOW, session)
  redis.call('PEXPIRE', K_SESS, IDLE + 60000)
  redis.call('PEXPIRE', K_SESS_USED, IDLE + 60000)
end`,
  },
} satisfies Partial<Record<BlockName, Block>>;

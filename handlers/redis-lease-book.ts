import type { Redis } from 'ioredis';
import { RedisLeaseStore } from '../book/redis-lease-store.js';
import type { LeaseStoreFactory } from './lease-book.js';
import type { HandlerSettings } from './settings.js';

/**
 * The shared lease store: one book in Redis for every replica of the discovery API and the
 * controller's health engine, kept across restarts. `redis` is the connection the entry
 * point opened (connectRedis); the store never closes it.
 */
export function redisLeaseStore(
  settings: HandlerSettings['discovery'],
  redis: Redis,
  keyPrefix: string,
): LeaseStoreFactory {
  return (catalog, logger) =>
    new RedisLeaseStore({
      redis,
      catalog,
      logger,
      keyPrefix,
      cooldownSeconds: settings.cooldownSeconds,
      maxCooldownSeconds: settings.maxCooldownSeconds,
      rateLimitCooldownSeconds: settings.rateLimitCooldownSeconds,
      maxRateLimitCooldownSeconds: settings.maxRateLimitCooldownSeconds,
      singleCooldownWindow: settings.singleCooldownWindow,
      suspicionTimeoutSeconds: settings.suspicionTimeoutSeconds,
      suspicionHoldoffSeconds: settings.suspicionHoldoffSeconds,
      sessionIdleSeconds: settings.sessionIdleSeconds,
      maxSessions: settings.maxSessions,
    });
}

import type { Redis } from 'ioredis';
import type { LeaseBookRules } from '../book/lease-book-settings.js';
import { RedisLeaseStore } from '../book/redis-lease-store.js';
import type { LeaseStoreFactory } from './lease-book.js';

/**
 * The shared lease store: one book in Redis for every replica of the discovery API and the
 * controller's health engine, kept across restarts. `redis` is the connection the entry
 * point opened (connectRedis); the store never closes it.
 */
export function redisLeaseStore(rules: LeaseBookRules, redis: Redis, keyPrefix: string): LeaseStoreFactory {
  return (catalog, logger) => new RedisLeaseStore({ redis, catalog, logger, keyPrefix, ...rules });
}

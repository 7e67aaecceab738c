// The LeaseStore contract against the Redis store, on a real redis-server (loopback, its own
// temporary directory). Each case gets a key prefix of its own: an empty book.
import { afterAll, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LeaseStore } from '../../discovery/lease-store.js';
import { connectRedis } from '../../discovery/redis-connection.js';
import { RedisLeaseStore } from '../../discovery/redis-lease-store.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { describeLeaseStoreContract } from './lease-store-contract.js';
import { silentLogger } from './fixtures.js';

let server: RedisServer;
let redis: Redis;
let books = 0;

beforeAll(async () => {
  server = await startRedisServer();
  redis = connectRedis({ url: server.url, logger: silentLogger });
  await redis.ping().catch(async () => {
    await new Promise((resolve) => redis.once('ready', resolve));
  });
});

afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

describeLeaseStoreContract({
  name: 'redis',
  create: (options) => new RedisLeaseStore({ ...options, redis, keyPrefix: `contract-${++books}` }),
  probeRequestsReady: (store: LeaseStore) => (store as RedisLeaseStore).subscribed(),
  settled: (store: LeaseStore) => (store as RedisLeaseStore).egressSettled(),
  dispose: (store: LeaseStore) => (store as RedisLeaseStore).close(),
});

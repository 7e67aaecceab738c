// The LeaseStore contract against the Redis store, on a real redis-server (loopback, its own
// temporary directory). Each case gets a key prefix of its own: an empty book.
import { afterAll, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import type { LeaseStore } from '../../book/lease-store.js';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { describeLeaseStoreContract } from './lease-store-contract.js';
import { silentLogger } from './fixtures.js';

let server: RedisServer;
let redis: Redis;
let books = 0;

beforeAll(async () => {
  server = await startRedisServer();
  // The contract is about what the book answers, not how fast: a generous deadline, so a
  // loaded CI machine stalling this process past the production default (1 s) cannot turn a
  // reply into a timeout. The deadline itself is tested in redis-lease-store.unit.test.ts.
  redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
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
  settled: async (store: LeaseStore) => {
    await (store as RedisLeaseStore).egressSettled();
    await (store as RedisLeaseStore).fleetSettled();
  },
  dispose: (store: LeaseStore) => (store as RedisLeaseStore).close(),
});

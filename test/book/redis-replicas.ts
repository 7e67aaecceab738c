// One real redis-server for a suite, and the replicas of one Redis book opened on it: each
// store with a connection of its own, as a process would have, closed after each test.
import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import { connectRedis } from '../../book/redis-connection.js';
import { RedisLeaseStore, type RedisLeaseStoreOptions } from '../../book/redis-lease-store.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { eventually, silentLogger } from './fixtures.js';

export interface RedisReplicas {
  /** The suite's redis-server (to stop and start it under the stores). */
  server(): RedisServer;
  /** A store on the suite's redis-server, once its connection answers. */
  open(options: Omit<RedisLeaseStoreOptions, 'redis' | 'logger'>): Promise<RedisLeaseStore>;
}

/** Registers the suite's hooks: the server for the whole file, the stores for one test. */
export function redisReplicas(): RedisReplicas {
  let server: RedisServer;
  const opened: { store: RedisLeaseStore; redis: Redis }[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterEach(() => {
    for (const { store, redis } of opened.splice(0)) {
      store.close();
      redis.disconnect();
    }
  });
  afterAll(async () => {
    await server.stop();
  });
  return {
    server: () => server,
    async open(options) {
      const redis = connectRedis({ url: server.url, logger: silentLogger, timeoutMs: 15_000 });
      await eventually(async () => (await redis.ping().catch(() => '')) === 'PONG', 15_000);
      const store = new RedisLeaseStore({ redis, logger: silentLogger, ...options });
      opened.push({ store, redis });
      return store;
    },
  };
}

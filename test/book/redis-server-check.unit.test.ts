import { pino } from 'pino';
import { connectRedis, reconnectAfter, whenReady } from '../../book/redis-connection.js';
import {
  infoField,
  readRedisServerFacts,
  redisServerProblem,
  type RedisServerFacts,
} from '../../book/redis-server-check.js';
import { startRedisServer } from '../harness/redis-server.js';

// Issue 47 item 5: the book refuses a Redis that can silently drop its keys, or that it cannot
// address as one primary.
const silent = pino({ level: 'silent' });

describe('which Redis the lease book can live in', () => {
  const standalone = (maxmemoryPolicy: string): RedisServerFacts => ({
    maxmemoryPolicy,
    clusterEnabled: false,
  });
  it.each<[string, RedisServerFacts, boolean, string | undefined]>([
    ['noeviction keeps every key', standalone('noeviction'), false, undefined],
    [
      'volatile-lru (managed offerings’ default) may evict cooldowns',
      standalone('volatile-lru'),
      false,
      'evicting_policy',
    ],
    ['allkeys-lru may evict leases', standalone('allkeys-lru'), false, 'evicting_policy'],
    [
      'volatile-ttl may evict the nearest-expiring bans',
      standalone('volatile-ttl'),
      false,
      'evicting_policy',
    ],
    ['a policy INFO does not show is not assumed safe', standalone('unknown'), false, 'evicting_policy'],
    ['--redis-allow-eviction accepts an evicting policy', standalone('volatile-lru'), true, undefined],
    [
      'a Cluster node is refused',
      { maxmemoryPolicy: 'noeviction', clusterEnabled: true },
      false,
      'cluster_mode',
    ],
    [
      '--redis-allow-eviction does not make a Cluster addressable',
      { maxmemoryPolicy: 'noeviction', clusterEnabled: true },
      true,
      'cluster_mode',
    ],
  ])('%s', (_, facts, allowEviction, code) => {
    expect(redisServerProblem(facts, { allowEviction })?.code).toBe(code);
  });

  it('the refusal names the policy and the flag that accepts it', () => {
    expect(redisServerProblem(standalone('allkeys-lfu'), { allowEviction: false })?.message).toMatch(
      /allkeys-lfu.*noeviction.*--redis-allow-eviction/,
    );
  });

  it.each<[string, string, string | undefined]>([
    ['a field among others', '# Memory\r\nused_memory:1\r\nmaxmemory_policy:noeviction\r\n', 'noeviction'],
    [
      'a prefix of another field is not it',
      'maxmemory_policy_x:1\nmaxmemory_policy:allkeys-lru\n',
      'allkeys-lru',
    ],
    ['absent', '# Memory\r\nused_memory:1\r\n', undefined],
  ])('INFO field: %s', (_, info, value) => {
    expect(infoField(info, 'maxmemory_policy')).toBe(value);
  });

  it.each<[string, boolean]>([
    ["READONLY You can't write against a read only replica.", true],
    ['LOADING Redis is loading the dataset in memory', false],
    ['NOSCRIPT No matching script', false],
  ])('a reply "%s" drops the connection: %s', (message, reconnect) => {
    expect(reconnectAfter(new Error(message))).toBe(reconnect);
  });
});

describe('the facts a real redis-server gives', () => {
  it.each<[string, string[], string | undefined]>([
    ['noeviction (as the sample manifest runs it)', [], undefined],
    ['volatile-lru', ['--maxmemory-policy', 'volatile-lru'], 'evicting_policy'],
  ])('%s', async (_, config, code) => {
    const server = await startRedisServer(config);
    const redis = connectRedis({ url: server.url, logger: silent });
    try {
      await whenReady(redis);
      const facts = await readRedisServerFacts(redis);
      expect(facts.clusterEnabled).toBe(false);
      expect(redisServerProblem(facts, { allowEviction: false })?.code).toBe(code);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});

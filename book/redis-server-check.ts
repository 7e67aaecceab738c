// What the lease book needs of the Redis it is given, checked each time a connection is
// ready: a server that can silently drop the book's keys, or one the client cannot address,
// is a configuration mistake to stop on, not a store to serve from.
import type { Redis } from 'ioredis';

/** What INFO says about the server, as far as the book cares. */
export interface RedisServerFacts {
  /** `maxmemory_policy` of INFO memory. */
  maxmemoryPolicy: string;
  /** `cluster_enabled` of INFO cluster. */
  clusterEnabled: boolean;
}

export interface RedisServerRules {
  /** `--redis-allow-eviction`: the operator accepts a policy that may evict keys. */
  allowEviction: boolean;
}

export type RedisServerProblem =
  { code: 'evicting_policy'; message: string } | { code: 'cluster_mode'; message: string };

/**
 * The problem with a server, or undefined when the book can live there. Only `noeviction`
 * keeps every key: every `allkeys-*` policy and every `volatile-*` one (the book's cooldowns,
 * holds and counters carry TTLs) may drop a running ban or a load counter under memory
 * pressure, so a lifted ban or an exceeded cap would look like success.
 */
export function redisServerProblem(
  facts: RedisServerFacts,
  rules: RedisServerRules,
): RedisServerProblem | undefined {
  if (facts.clusterEnabled)
    return {
      code: 'cluster_mode',
      message:
        'the Redis is a Redis Cluster node; the lease store speaks to one standalone primary (a managed endpoint with failover works): give --redis-url a standalone Redis',
    };
  if (facts.maxmemoryPolicy !== 'noeviction' && !rules.allowEviction)
    return {
      code: 'evicting_policy',
      message: `the Redis's maxmemory-policy is ${facts.maxmemoryPolicy}, which may evict the lease book's keys (a lifted ban, a lost lease, an exceeded cap); set it to noeviction, or accept the risk with --redis-allow-eviction`,
    };
  return undefined;
}

/** Reads one `field:value` line of an INFO section. */
export function infoField(info: string, field: string): string | undefined {
  for (const line of info.split(/\r?\n/)) {
    if (line.startsWith(`${field}:`)) return line.slice(field.length + 1).trim();
  }
  return undefined;
}

/** The facts of a connected server, from INFO (allowed where CONFIG GET is not, as on managed offerings). */
export async function readRedisServerFacts(redis: Redis): Promise<RedisServerFacts> {
  const [memory, cluster] = await Promise.all([redis.info('memory'), redis.info('cluster')]);
  return {
    maxmemoryPolicy: infoField(memory, 'maxmemory_policy') ?? 'unknown',
    clusterEnabled: infoField(cluster, 'cluster_enabled') === '1',
  };
}

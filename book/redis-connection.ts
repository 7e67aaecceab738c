// The client connection a RedisLeaseStore uses: every call bounded in time, and failing at
// once while the connection is down (no queue of requests waiting for a Redis that may not
// come back), reconnecting by itself in the background.
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';

export const DEFAULT_REDIS_TIMEOUT_MS = 1000;

export interface RedisConnectionOptions {
  /** redis://host:port[/db] or rediss:// (TLS). */
  url: string;
  /** From a Secret (REDIS_PASSWORD), never a flag value; overrides one in the URL. */
  password?: string;
  username?: string;
  /** Longest a command (or the connect) may take before the call fails as store_unavailable. */
  timeoutMs?: number;
  /** PEM CA certificates a rediss:// server is verified against (a managed Redis's server CA). */
  ca?: string;
  logger: Logger;
}

/**
 * After a failover the address may still lead to the demoted primary, now a replica that
 * answers every write READONLY while the TCP connection stays up. Dropping the connection
 * makes the next one follow the address to the new primary; the failed call is a 503.
 */
export function reconnectAfter(err: Error): boolean {
  return err.message.startsWith('READONLY');
}

export function connectRedis(options: RedisConnectionOptions): Redis {
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  const redisOptions: RedisOptions = {
    // Fail fast while disconnected: a 503 with Retry-After now beats a request hanging.
    enableOfflineQueue: false,
    commandTimeout: timeoutMs,
    connectTimeout: Math.max(timeoutMs, 1000),
    maxRetriesPerRequest: 0,
    // Reconnect forever, at most a second apart: the store recovers when Redis returns.
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    lazyConnect: false,
    reconnectOnError: (err) => (reconnectAfter(err) ? 1 : false),
    ...(options.ca === undefined || !options.url.startsWith('rediss:') ? {} : { tls: { ca: options.ca } }),
    ...(options.password === undefined || options.password === '' ? {} : { password: options.password }),
    ...(options.username === undefined || options.username === '' ? {} : { username: options.username }),
  };
  const redis = new Redis(options.url, redisOptions);
  const logger = options.logger;
  let down = false;
  redis.on('error', (err: Error) => {
    // ioredis reports every failed reconnect; one warning per outage is enough.
    if (!down) logger.warn({ err: { message: err.message } }, 'Redis lease store: connection error');
    down = true;
  });
  redis.on('ready', () => {
    if (down) logger.info('Redis lease store: connected again');
    down = false;
  });
  return redis;
}

/** Resolves once the connection is ready (commands fail at once before: no offline queue). */
export async function whenReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Redis not ready within ${timeoutMs} ms`)), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

// Targets are private to the team that crawls them (docs/api.md); behind two discovery
// replicas on one Redis book a team's own target must read the same through either replica:
// the book keeps who reported each cooldown, so which replica took the report does not matter.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { ApiTokens, readTokensFile } from '../../book/api-tokens.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { createDiscoveryApp } from '../../discovery/app.js';
import { DiscoveryServer } from '../../discovery/server.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';
import { call, type CallResult } from './api-harness.js';

const TEAM_A = 'team-a-token-0123456789abcdef';
const TEAM_B = 'team-b-token-fedcba9876543210';
const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

interface Replica {
  url: string;
  stop(): Promise<void>;
}

let redis: RedisServer;
const replicas: Replica[] = [];

async function startReplica(): Promise<Replica> {
  const connection: Redis = connectRedis({ url: redis.url, logger: silentLogger, timeoutMs: 1000 });
  await whenReady(connection);
  const catalog = new TestCatalog([proxy('ns/a', { maxLeases: 10 })]);
  const store = new RedisLeaseStore({
    redis: connection,
    catalog,
    logger: silentLogger,
    keyPrefix: 'privacy',
  });
  const { tokens, policies } = readTokensFile(`team-a: ${TEAM_A}\nteam-b: ${TEAM_B}\n`, 'tokens');
  const app = createDiscoveryApp({
    catalog,
    leases: store,
    tokens: new ApiTokens(tokens, policies),
    logger: silentLogger,
    registry: new Registry(),
  });
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, silentLogger);
  await server.start();
  await store.start();
  return {
    url: server.url,
    async stop() {
      await store.stop();
      store.close();
      await server.stop();
      connection.disconnect();
    },
  };
}

const cooldowns = (r: CallResult) =>
  (r.body as { reasons: { code: string; cooldowns?: unknown[] }[] }).reasons.find(
    (x) => x.code === 'cooling_down',
  )?.cooldowns;

let one: Replica;
let two: Replica;

beforeAll(async () => {
  redis = await startRedisServer();
  one = await startReplica();
  two = await startReplica();
  replicas.push(one, two);
  // Team A leases and reports its target banned through replica one.
  const leased = await call(one.url, 'POST', '/v1/leases', {
    body: { target: 'shop.example' },
    ...as(TEAM_A),
  });
  expect(leased.status).toBe(201);
  const { leaseID } = leased.body as { leaseID: string };
  const reported = await call(one.url, 'POST', `/v1/leases/${leaseID}/report`, {
    body: { result: 'banned' },
    ...as(TEAM_A),
  });
  expect(reported.status).toBe(200);
});

afterAll(async () => {
  for (const r of replicas.splice(0)) await r.stop();
  await redis.stop();
});

describe("one proxy's cooldowns behind two replicas of one Redis book", () => {
  it.each<[string, () => Replica, string, unknown[]]>([
    ['team A through the replica that took its report', () => one, TEAM_A, [{ target: 'shop.example' }]],
    ['team A through the other replica', () => two, TEAM_A, [{ target: 'shop.example' }]],
    ['team B through the replica that took the report', () => one, TEAM_B, [{ target: null, hidden: true }]],
    ['team B through the other replica', () => two, TEAM_B, [{ target: null, hidden: true }]],
  ])('%s', async (_, replica, token, expected) => {
    const answer = await call(replica().url, 'GET', '/v1/proxies/ns/a', as(token));
    expect(answer.status).toBe(200);
    expect(cooldowns(answer)).toEqual(
      expected.map((c) => ({ ...(c as object), until: expect.any(String) as unknown })),
    );
    if (token === TEAM_B) expect(answer.text).not.toContain('shop.example');
  });
});

// The book's fair share among tokens (issue 48 item 6) against a real Redis: team B floods the
// API with 512 lease/release loops at once while team A leases one at a time. Counted, not
// timed (a loaded machine stretches both alike): how many of B's book operations finished
// after A's request reached the server and before A's lease did. Without the share every
// B request already in Redis's queue goes first; with it, A waits for the few running.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express from 'express';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import { ApiTokens } from '../../book/api-tokens.js';
import type { LeaseStore } from '../../book/lease-store.js';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { RedisLeaseStore } from '../../book/redis-lease-store.js';
import { createDiscoveryApp } from '../../discovery/app.js';
import { DiscoveryServer } from '../../discovery/server.js';
import type { FairShareLimits } from '../../discovery/fair-share.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

const TEAM_A = 'a'.repeat(32);
const TEAM_B = 'b'.repeat(32);
const B_LANES = 512;
const A_LEASES = 30;
const SHARE: FairShareLimits = { inFlight: 4, queuedPerToken: 256 };
// What "no share" was: every request straight into the book.
const NO_SHARE: FairShareLimits = { inFlight: 1_000_000, queuedPerToken: 1_000_000 };

let redis: RedisServer;
let prefixes = 0;

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await redis.stop();
});

/** The store, telling `finished` of each acquire and release as it finishes (by owner). */
function watched(
  store: LeaseStore,
  finished: (owner: string | undefined, op: 'acquire' | 'release') => void,
): LeaseStore {
  return new Proxy(store, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (prop === 'acquire')
        return async (request: Parameters<LeaseStore['acquire']>[0]) => {
          const result = await target.acquire(request);
          finished(request.owner, 'acquire');
          return result;
        };
      if (prop === 'release')
        return async (id: string, owner?: string, requestID?: string) => {
          const result = await target.release(id, owner, requestID);
          finished(owner, 'release');
          return result;
        };
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

interface Flood {
  /** For each of A's leases: B's book operations that finished between its arrival and its grant. */
  ahead: number[];
  /** B's answers by "status code" (201 granted, 204 released, 429 book_queue_full ...). */
  bAnswers: Record<string, number>;
  /** The Retry-After headers of B's 429s. */
  retryAfter: Set<string>;
  /** The app's /metrics text at the end. */
  metrics: string;
}

async function flood(share: FairShareLimits): Promise<Flood> {
  // B's book operations finished so far, and that count at each of A's grants.
  let bDone = 0;
  const atGrant: number[] = [];
  const connection = connectRedis({ url: redis.url, logger: silentLogger, timeoutMs: 5_000 });
  await whenReady(connection);
  const catalog = new TestCatalog(
    Array.from({ length: 4 }, (_, i) => proxy(`ns/p${i}`, { maxLeases: 1000, attributes: { pool: 'x' } })),
  );
  const store = new RedisLeaseStore({
    redis: connection,
    catalog,
    logger: silentLogger,
    keyPrefix: `fair${prefixes++}`,
    cooldownSeconds: 900,
  });
  await store.start();
  const tokens = new ApiTokens(
    new Map([
      ['team-a', TEAM_A],
      ['team-b', TEAM_B],
    ]),
  );
  const registry = new Registry();
  const app = createDiscoveryApp({
    catalog,
    leases: watched(store, (owner, op) => {
      if (owner === 'team-b') bDone++;
      else if (owner === 'team-a' && op === 'acquire') atGrant.push(bDone);
    }),
    tokens,
    fairShare: share,
    logger: silentLogger,
    registry,
  });
  // Where A's request reaches the server: B's count then.
  let arrivedAt: number | undefined;
  const outer = express();
  outer.use((req, _res, next) => {
    if (req.headers.authorization === `Bearer ${TEAM_A}` && req.method === 'POST') arrivedAt = bDone;
    next();
  });
  outer.use(app);
  const server = new DiscoveryServer(outer, { host: '127.0.0.1', port: 0 }, silentLogger);
  await server.start();
  const call = async (pool: Pool, token: string, method: 'POST' | 'DELETE', path: string, body?: unknown) => {
    const response = await pool.request({
      path,
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.body.text();
    return {
      status: response.statusCode,
      retryAfter: response.headers['retry-after'],
      body: text === '' ? {} : (JSON.parse(text) as { leaseID?: string; error?: string }),
    };
  };
  const lease = { selector: { pool: 'x' }, ttlSeconds: 60 };
  const bPool = new Pool(server.url, { connections: B_LANES });
  const aPool = new Pool(server.url, { connections: 1 });
  let flooding = true;
  const bAnswers: Record<string, number> = {};
  const retryAfter = new Set<string>();
  const answered = (got: Awaited<ReturnType<typeof call>>) => {
    const key = `${got.status} ${got.body.error ?? ''}`.trim();
    bAnswers[key] = (bAnswers[key] ?? 0) + 1;
    if (got.status === 429) retryAfter.add(String(got.retryAfter));
  };
  const lane = async () => {
    while (flooding) {
      const got = await call(bPool, TEAM_B, 'POST', '/v1/leases', lease);
      answered(got);
      if (got.status !== 201) {
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      // A release refused (its queue full) is sent again: B never leaks its own leases.
      for (;;) {
        const gone = await call(bPool, TEAM_B, 'DELETE', `/v1/leases/${got.body.leaseID!}`);
        answered(gone);
        if (gone.status !== 429) break;
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  };
  const lanes = Array.from({ length: B_LANES }, lane);
  const ahead: number[] = [];
  try {
    // B at full flood before A starts.
    while (bDone < 500) await new Promise((r) => setTimeout(r, 10));
    for (let i = 0; i < A_LEASES; i++) {
      const got = await call(aPool, TEAM_A, 'POST', '/v1/leases', lease);
      expect(got.status).toBe(201);
      ahead.push(atGrant.at(-1)! - arrivedAt!);
      await call(aPool, TEAM_A, 'DELETE', `/v1/leases/${got.body.leaseID!}`);
    }
  } finally {
    flooding = false;
    await Promise.all(lanes);
    await Promise.all([bPool.close(), aPool.close()]);
    await server.stop();
    await store.stop();
    store.close();
    connection.disconnect();
  }
  return { ahead, bAnswers, retryAfter, metrics: await registry.metrics() };
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

describe("one token's flood of the book, another token's leases", () => {
  it("run ahead of the flood's backlog with the share, and behind it without", async () => {
    const without = (await flood(NO_SHARE)).ahead;
    const withShare = (await flood(SHARE)).ahead;
    const figures = { without: median(without), with: median(withShare) };
    console.log(`B operations ahead of A's lease, median of ${A_LEASES}: ${JSON.stringify(figures)}`);
    // Without the share A's lease waits for B's requests already in the book's queue (a median
    // of 78-196 with 512 lanes, 102 beside a busy core, measured; 256 lanes gave 25-95, once
    // under the bar in a full run); with it, for the operations running (4) and the few that
    // finished while A's body was read (a median of ~5).
    expect(figures.without).toBeGreaterThanOrEqual(8 * SHARE.inFlight);
    expect(figures.with).toBeLessThanOrEqual(3 * SHARE.inFlight);
    expect(figures.with * 4).toBeLessThanOrEqual(figures.without);
  }, 120_000);
});

describe('a token past its queue bound', () => {
  it('gets 429 book_queue_full with Retry-After, and the other token is served all along', async () => {
    const { ahead, bAnswers, retryAfter, metrics } = await flood({ inFlight: 1, queuedPerToken: 8 });
    expect(Object.keys(bAnswers).sort()).toEqual(['201', '204', '429 book_queue_full']);
    expect(retryAfter).toEqual(new Set(['1']));
    // A's 30 leases were all granted (flood() checks each), never behind B's refused backlog.
    expect(ahead).toHaveLength(A_LEASES);
    expect(median(ahead)).toBeLessThanOrEqual(3 * 1 + 2);
    expect(metrics).toMatch(/proxy_operator_discovery_quota_total\{token="team-b",quota="queue"\} [1-9]/);
    expect(metrics).not.toMatch(/token="team-a",quota="queue"/);
    expect(metrics).toMatch(/proxy_operator_discovery_book_wait_seconds_count\{token="team-a"\} [1-9]/);
  }, 120_000);
});

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Watch } from '@kubernetes/client-node';
import { request } from 'undici';
import type { Proxy } from '../../crds/proxy-types.js';
import type { Redis } from 'ioredis';
import { connectRedis } from '../../book/redis-connection.js';
import { memoryLeaseStore, type LeaseStoreFactory } from '../../handlers/lease-book.js';
import { redisLeaseStore } from '../../handlers/redis-lease-book.js';
import { DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import {
  condition,
  everyProxy,
  isReady,
  managedSpec,
  operatorSuite,
  quiet,
  replacementsCounted,
} from './operator-fixture.js';

// Burned proxies of two teams rotate at once, on one provider: each team's token (scoped to its
// own proxies by selector, trusted for rotation) leases all 4 of its proxies and reports each
// banned, both teams at the same moment. With spec.rotation.whenCoolingDownOn 1 all 8 come due
// together; --max-unavailable 2 is the provider's, not a team's: at no moment are more than 2
// of the 8 draining or between instances, and every one is rotated once. On both stores.

const CAP = 2;
const PER_TEAM = 4;
// Long enough for 4 rounds of 2 (a round: a 2 s drain, a new instance Ready, the waiters' slot
// poll): a proxy is due only while it cools down, and one whose cooldowns end before a slot
// frees serves on (with --cooldown 10 s, 3 of the 8 rotated).
const COOLDOWN_SECONDS = 60;
const TOKENS = { a: 'team-a-token-0123456789abcdef', b: 'team-b-token-0123456789abcdef' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tokensFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'ban-teams-')), 'tokens');
  writeFileSync(
    file,
    `team-a: ${TOKENS.a} selector=team=a rotation-trusted\nteam-b: ${TOKENS.b} selector=team=b rotation-trusted\n`,
  );
  return file;
}

/** Between instances, draining, or on a new one not yet seen Ready. */
const replacing = (p: Proxy) => p.status?.phase === 'Provisioning' || p.status?.replacement !== undefined;

/**
 * One store's row: its operator (in a namespace of its own), its Redis when it has one, and the
 * scenario run against them. Registers the row's hooks in the calling describe block.
 */
function storeRow(store: 'memory' | 'redis'): () => Promise<void> {
  let redis: RedisServer | undefined;
  // The store never closes the connection it is given (the entry point owns it): this suite
  // does, after the operator stopped. Left open, it reconnected for ever to the stopped
  // server and kept the in-band jest run from exiting.
  const connections: Redis[] = [];
  // ... nor its probe-request subscriber (a connection of its own), which the store's close ends.
  const stores: { close?: () => void }[] = [];
  beforeAll(async () => {
    if (store === 'redis') redis = await startRedisServer();
  });
  const book = DEFAULT_HANDLER_SETTINGS.book;
  const storeFactory = (): LeaseStoreFactory => {
    if (store === 'memory') return memoryLeaseStore({ ...book, cooldownSeconds: COOLDOWN_SECONDS });
    const connection = connectRedis({ url: redis!.url, logger: quiet });
    connections.push(connection);
    const factory = redisLeaseStore(
      { ...book, cooldownSeconds: COOLDOWN_SECONDS },
      connection,
      `ban-teams-${process.pid}`,
    );
    return (catalog, logger) => {
      const made = factory(catalog, logger);
      stores.push(made as unknown as { close?: () => void });
      return made;
    };
  };
  const suite = operatorSuite(`ban-teams-${store}`, {
    settings: {
      replaceUnhealthyAfterSeconds: 0,
      rotationDrainSeconds: 2,
      driftCheckSeconds: 1,
      maxUnavailable: { default: { kind: 'count', value: CAP }, byProvider: {} },
      book: { cooldownSeconds: COOLDOWN_SECONDS },
      discovery: { tokensFile: tokensFile() },
    },
    leaseStore: storeFactory,
  });
  // Registered after operatorSuite's: jest runs a block's afterAll hooks in order, so the
  // operator stops before its Redis does.
  afterAll(async () => {
    for (const made of stores) made.close?.();
    for (const connection of connections) connection.disconnect();
    await redis?.stop();
  });
  const { api, kc, namespace } = suite;
  const names = (team: 'a' | 'b') => Array.from({ length: PER_TEAM }, (_, i) => `team-${team}-${i}`);

  async function call(team: 'a' | 'b', path: string, body: unknown) {
    const res = await request(`${suite.op.discoveryURL}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKENS[team]}` },
      body: JSON.stringify(body),
    });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  }

  /** The team leases each of its proxies for one site (held, so each lease is another proxy), then reports every one banned. */
  async function burn(team: 'a' | 'b'): Promise<string[]> {
    const leases: Array<{ leaseID: string; proxy: { id: string } }> = [];
    for (let i = 0; i < PER_TEAM; i++) {
      const r = await call(team, '/v1/leases', {
        selector: { team },
        target: 'shop.example',
        ttlSeconds: 60,
      });
      expect(r.status).toBe(201);
      leases.push(r.body as unknown as (typeof leases)[number]);
    }
    const reports = await Promise.all(
      leases.map((l) => call(team, `/v1/leases/${l.leaseID}/report`, { result: 'banned' })),
    );
    expect(reports.map((r) => r.status)).toEqual(Array<number>(PER_TEAM).fill(200));
    return leases.map((l) => l.proxy.id).sort();
  }

  return async () => {
    const all = [...names('a'), ...names('b')];
    await Promise.all(
      all.map((n) =>
        api.create(n, {
          spec: managedSpec(suite.target, {
            attributes: { team: n.startsWith('team-a') ? 'a' : 'b' },
            rotation: { whenCoolingDownOn: 1 },
          }),
        }),
      ),
    );
    const ready = await everyProxy(api, all, 'all Ready', isReady, 90_000);
    // A rotation's new instance keeps the old one's ID (named by the Proxy and its revision): a new IP tells it.
    const first = new Map(ready.map((p) => [p.metadata.name, p.status!.ip!]));
    // Past the rotation floor (a ban must end after up + --cooldown × 1.1 to count).
    await sleep(COOLDOWN_SECONDS * 200 + 300);

    const state = new Map<string, boolean>();
    let maxReplacing = 0;
    const watching = await new Watch(kc).watch(
      `/apis/crawl.example.com/v1alpha1/namespaces/${namespace}/proxies`,
      {},
      (_t, p: Proxy) => {
        state.set(p.metadata.name, replacing(p));
        maxReplacing = Math.max(maxReplacing, [...state.values()].filter(Boolean).length);
      },
      () => {},
    );
    try {
      const [burnedA, burnedB] = await Promise.all([burn('a'), burn('b')]);
      expect(burnedA).toEqual(names('a').map((n) => `${namespace}/${n}`));
      expect(burnedB).toEqual(names('b').map((n) => `${namespace}/${n}`));
      await everyProxy(
        api,
        all,
        'every proxy rotated and Ready',
        (p) => isReady(p) && p.status?.ip !== first.get(p.metadata.name) && !replacing(p),
        150_000,
      ).catch(async (err: Error) => {
        const rotations = await replacementsCounted(suite.op.registry, 'Rotation');
        const where = (await Promise.all(all.map((n) => api.get(n)))).map(
          (p) =>
            `${p.metadata.name} ${p.status?.phase} new=${p.status?.ip !== first.get(p.metadata.name)} ${condition(p, 'Provisioned')?.reason}: ${condition(p, 'Provisioned')?.message}`,
        );
        throw new Error(
          `${err.message}; ${rotations} rotations, max ${maxReplacing} at once\n${where.join('\n')}`,
        );
      });
      // No second rotation: the new instances' egress left the old cooldowns behind.
      await sleep(3_000);
    } finally {
      watching.abort();
    }
    const rotations = await replacementsCounted(suite.op.registry, 'Rotation');
    process.stdout.write(
      `[ban-rotation-teams ${store}] cap ${CAP}: at most ${maxReplacing} of ${all.length} rotating at once; ${rotations} rotations\n`,
    );
    expect(maxReplacing).toBeLessThanOrEqual(CAP);
    expect(rotations).toBe(all.length);
  };
}

describe('burned proxies of two teams rotate within one budget', () => {
  // Each row waits mostly on its operator's clock (the rotation floor, drains, slot polls), on
  // an operator and namespace of its own: the two run at once.
  const rows = { memory: storeRow('memory'), redis: storeRow('redis') };
  it.concurrent.each(['memory', 'redis'] as const)(
    `${2 * PER_TEAM} proxies of two teams banned at once, cap ${CAP}: each rotated once, at most ${CAP} at a time (%s store)`,
    (store) => rows[store](),
    300_000,
  );
});

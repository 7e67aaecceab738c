// A Redis frozen mid-write (SIGSTOP; issue 47 item 3), seen from outside two real operator
// processes as dist/operator-redis.yaml runs them (`--components=discovery
// --lease-store=redis`, one redis-server shared). Crawlers write through process A without a
// pause (the TypeScript client: leases, ban reports, /v1/reports batches, releases; the Crawlee
// integration's SessionLeases: leases, bans, batched oks, releases, session ends); Redis is
// frozen while those writes are in flight, so they answer 503 outcome_unknown; it resumes and
// every write is sent again with its request id: half the crawlers through process B (the
// other replica), the rest through A, the integration by its client's own retries. Then the
// book (as both replicas' /v1/proxies and Redis's own lease keys tell it) must hold exactly
// the leases the crawlers hold (0 phantom leases), every ban and every ok must be counted once
// (one cooldown each, the one its answer named), and every batch must have been applied whole
// (none of its items answered lease_not_found by a replay). Without idempotency (the server
// ignoring Idempotency-Key) it fails: phantom leases, doubled bans and oks, replayed batches.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { CoreV1Api } from '@kubernetes/client-node';
import { Agent } from 'undici';
import {
  DiscoveryApiError,
  DiscoveryClient,
  DiscoveryTimeoutError,
  DiscoveryTransportError,
  type Lease,
  type Proxy,
  type ProxyDetail,
} from '../../client/src/index.js';
import { SessionLeases } from '../../client/src/crawlee/session-leases.js';
import { ANONYMOUS_OWNER, unscopedKey } from '../../book/lease-owner.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { KUBECONFIG_ENV, testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, until, type OperatorProcess } from '../harness/operator-process.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';

const kc = testKubeConfig();
const namespace = uniqueName('frozen-procs');
/** Short, so a frozen Redis answers 503 soon; a slow reply under load is one more retry, no harm. */
const REDIS_TIMEOUT_MS = 1000;
/** The TypeScript client's crawlers on pool `raw`; the Crawlee integration's on pool `crawlee`. */
const RAW = ['raw-0', 'raw-1', 'raw-2'];
const CRAWLEE = ['crawlee-0', 'crawlee-1'];
const WORKERS = 4;
/** Cycles each crawler runs after Redis resumed, every write of them a fresh one. */
const CYCLES_AFTER = 2;

const agent = new Agent({ connections: 32 });
let redis: RedisServer;
const processes: OperatorProcess[] = [];
let portA: number;
let portB: number;
let wire: Wire | undefined;
/** Set when the suite ends, passed or not: every loop and retry below stops. */
let stopping = false;
let integration: SessionLeases | undefined;

const clientOf = (port: number, unavailableRetries: number) =>
  new DiscoveryClient({
    baseUrl: `http://127.0.0.1:${port}`,
    dispatcher: agent,
    unavailableRetries,
    timeoutMs: 30_000,
  });

function startReplica(port: number, metrics: number): OperatorProcess {
  const op = runOperator([
    '--kubeconfig',
    process.env[KUBECONFIG_ENV]!,
    '--watch-namespace',
    namespace,
    '--components=discovery',
    '--lease-store=redis',
    `--redis-url=${redis.url}`,
    `--redis-key-prefix=${namespace}`,
    `--redis-timeout=${REDIS_TIMEOUT_MS}`,
    '--metrics-address',
    `127.0.0.1:${metrics}`,
    '--discovery-address',
    `127.0.0.1:${port}`,
    '--log-level=warn',
    // The book is under test, not the per-token rate limit.
    '--discovery-rate-limit=1000000',
    '--discovery-rate-burst=1000000',
  ]);
  processes.push(op);
  return op;
}

async function serving(port: number, op: OperatorProcess): Promise<void> {
  const fleet = RAW.length + CRAWLEE.length;
  await until(
    `the replica on :${port} serving the fleet`,
    async () =>
      (await clientOf(port, 0).listProxies({ healthy: true })).length === fleet ? true : undefined,
    90_000,
  ).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${op.output()}`);
  });
}

beforeAll(async () => {
  redis = await startRedisServer();
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const proxies = new ProxyApi(kc, namespace);
  const now = new Date().toISOString();
  for (const [i, name] of [...RAW, ...CRAWLEE].entries()) {
    await proxies.create(name, {
      spec: {
        mode: 'External',
        endpoint: { host: `127.0.0.${20 + i}`, port: 3128 },
        maxLeases: 50,
        attributes: { pool: name.split('-')[0]! },
      },
    });
    // No controller runs here: the test plays the health engine and writes the verdicts.
    await proxies.patchStatus(name, {
      phase: 'Ready',
      latencyMillis: 10 * (i + 1),
      conditions: [
        {
          type: 'Healthy',
          status: 'True',
          reason: 'ProbeSucceeded',
          message: 'test',
          lastTransitionTime: now,
        },
      ],
    });
  }
  [portA, portB] = [await freePort(), await freePort()];
  const a = startReplica(portA, await freePort());
  const b = startReplica(portB, await freePort());
  await Promise.all([serving(portA, a), serving(portB, b)]);
}, 180_000);

afterAll(async () => {
  stopping = true;
  wire?.close();
  // Resumed first (a frozen Redis answers no one, and is killed resumed), then the
  // integration closes (its renewals stop), then the processes go.
  redis?.resume();
  await integration?.close();
  for (const op of processes) op.child.kill('SIGKILL');
  await Promise.all(processes.map((op) => op.exited));
  await redis?.stop();
  await agent.close();
});

/** What the crawlers did, as the answers said (the first answer of each write). */
class Ledger {
  /** Leases held now, by id. */
  readonly held = new Map<string, Lease>();
  readonly banned = new Map<string, number>();
  readonly ok = new Map<string, number>();
  readonly bans: { proxyID: string; target: string; until: number }[] = [];
  /** Batch items answered with an error: a replay of an applied batch finds its released lease gone. */
  readonly batchErrors: unknown[] = [];

  count(map: Map<string, number>, proxyID: string): void {
    map.set(proxyID, (map.get(proxyID) ?? 0) + 1);
  }
}

/**
 * Every answer the crawlers got, by request id, as undici saw it on the wire (the client's own
 * retries included): which replica answered, with what status.
 */
class Wire {
  readonly answers = new Map<string, { port: number; status: number }[]>();
  private readonly listener = (message: unknown) => {
    const { request, response } = message as {
      request: { origin: string; headers: string[] };
      response: { statusCode: number };
    };
    const at = request.headers.findIndex((h, i) => i % 2 === 0 && h.toLowerCase() === 'idempotency-key');
    if (at < 0) return;
    const id = request.headers[at + 1]!;
    const seen = this.answers.get(id) ?? [];
    seen.push({ port: Number(new URL(request.origin).port), status: response.statusCode });
    this.answers.set(id, seen);
  };

  constructor() {
    subscribe('undici:request:headers', this.listener);
  }

  close(): void {
    unsubscribe('undici:request:headers', this.listener);
  }

  /** Request ids answered 503 first and a success later, kept by `which`. */
  retried(which: (id: string) => boolean): { id: string; ports: number[] }[] {
    return [...this.answers]
      .filter(([id, seen]) => which(id) && seen[0]!.status === 503 && seen.at(-1)!.status < 300)
      .map(([id, seen]) => ({ id, ports: seen.map((s) => s.port) }));
  }
}

/** A call that got no answer: worth sending again with the same request id. */
function unanswered(err: unknown): boolean {
  if (err instanceof DiscoveryApiError) return err.status === 503;
  return err instanceof DiscoveryTimeoutError || err instanceof DiscoveryTransportError;
}

/**
 * A crawler on the TypeScript client. Every write goes to process A first; a write without an
 * answer is sent again every second with its request id, through `retry` (B or A again).
 */
class Crawler {
  cycles = 0;
  /** Its writes' answers 503 outcome_unknown (each then sent again with its request id). */
  unknown = 0;
  private readonly first = clientOf(portA, 0);
  private readonly retry: DiscoveryClient;

  constructor(
    private readonly index: number,
    private readonly ledger: Ledger,
    retryViaB: boolean,
  ) {
    this.retry = clientOf(retryViaB ? portB : portA, 0);
  }

  async write<T>(
    requestID: string,
    call: (client: DiscoveryClient, requestID: string) => Promise<T>,
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await call(attempt === 0 ? this.first : this.retry, requestID);
      } catch (err) {
        if (!unanswered(err) || attempt >= 120 || stopping) throw err;
        if (err instanceof DiscoveryApiError && err.code === 'outcome_unknown') this.unknown++;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  /** One lease, one ban on it (a site of its own), and the previous lease ended: by a batch or a DELETE. */
  async cycle(): Promise<void> {
    const id = `w${this.index}-c${this.cycles}`;
    const previous = this.previous;
    const lease = await this.write(`${id}-lease`, (c, requestID) =>
      c.lease({ ttlSeconds: 600, selector: { pool: 'raw' } }, { requestID }),
    );
    this.ledger.held.set(lease.leaseID, lease);
    this.previous = lease;
    const target = `${id}.example`;
    const ban = await this.write(`${id}-ban`, (c, requestID) =>
      c.report(lease.leaseID, 'banned', { target }, { requestID }),
    );
    this.ledger.count(this.ledger.banned, ban.proxyID);
    this.ledger.bans.push({ proxyID: ban.proxyID, target, until: Date.parse(ban.cooldownUntil!) });
    if (previous !== undefined) {
      if (this.cycles % 2 === 1) {
        // Two oks and a release in one batch: applied whole, once, whichever replica answers.
        const { items } = await this.write(`${id}-batch`, (c, requestID) =>
          c.reportMany(
            [
              { leaseID: lease.leaseID, result: 'ok' },
              { leaseID: previous.leaseID, result: 'ok', release: true },
            ],
            { requestID },
          ),
        );
        for (const item of items) {
          // A replay of an applied batch would find the released lease gone.
          if ('error' in item) this.ledger.batchErrors.push(item);
          else this.ledger.count(this.ledger.ok, item.proxyID);
        }
      } else {
        await this.write(`${id}-release`, (c, requestID) => c.release(previous.leaseID, { requestID }));
      }
      this.ledger.held.delete(previous.leaseID);
    }
    this.cycles++;
  }

  private previous?: Lease;
}

/**
 * The Crawlee integration's write path: sessions get leases (shared, leased ahead), succeed,
 * get banned, end; its client retries a 503 by itself with the write's one request id.
 */
async function crawl(
  leases: SessionLeases,
  stop: () => boolean,
  progress: { sessions: number },
): Promise<void> {
  for (let n = 0; !stop() && !stopping; n++) {
    const session = `s${n % 3}`;
    const host = `site-${n}.example`;
    const url = await leases.proxyUrl(session, host);
    if (url === null) throw new Error('the integration went direct');
    leases.answered(session, host, url);
    leases.succeeded(session, host, url);
    if (n % 2 === 0) await leases.blocked(session, host, url, 'banned');
    if (n % 5 === 4) await leases.sessionEnded(session);
    progress.sessions++;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function fleet(port: number): Promise<Map<string, Proxy>> {
  const items = await clientOf(port, 10).listProxies();
  return new Map(items.map((p) => [p.id, p]));
}

describe('two operator processes over a Redis frozen mid-write (SIGSTOP), then resumed', () => {
  it('0 phantom leases, every ban and ok counted once, every batch whole', async () => {
    const ledger = new Ledger();
    wire = new Wire();
    const integrationWrite = (id: string) => !id.startsWith('w');
    const crawlers = Array.from({ length: WORKERS }, (_, i) => new Crawler(i, ledger, i % 2 === 0));
    const warnings: string[] = [];
    integration = new SessionLeases({
      client: clientOf(portA, 120),
      selector: { pool: 'crawlee' },
      ttlSeconds: 600,
      maxLeases: 3,
      okReportIntervalMs: 100,
      // A write given up on is a warning, or a debug line for a dropped ok: none may happen.
      log: {
        debug: (message) => void (/failed/.test(message) && warnings.push(message)),
        warning: (message) => void warnings.push(message),
      },
    });
    const progress = { sessions: 0 };
    let resumed = false;
    let sessionsAtResume = 0;
    const cyclesAtResume: number[] = [];
    const done = (i: number) => resumed && crawlers[i]!.cycles >= cyclesAtResume[i]! + CYCLES_AFTER;

    const running = [
      ...crawlers.map(async (crawler, i) => {
        while (!done(i) && !stopping) await crawler.cycle();
      }),
      crawl(integration, () => resumed && progress.sessions >= sessionsAtResume + 5, progress),
    ];
    const failed = Promise.all(running).then(() => undefined);

    // Every crawler mid-crawl: then Redis stops, whatever it was running or had in its socket.
    await Promise.race([
      until(
        'every crawler writing',
        async () => (crawlers.every((c) => c.cycles >= 2) ? true : undefined),
        90_000,
      ),
      failed,
    ]);
    redis.pause();
    try {
      // The writes in flight answer outcome_unknown after --redis-timeout, and are sent again
      // while Redis is still frozen: each copy waits in its socket, to run when it resumes.
      await Promise.race([
        until(
          "every crawler's write and one of the integration's answered 503 twice",
          async () =>
            crawlers.every((c) => c.unknown >= 2) &&
            [...wire!.answers].some(
              ([id, seen]) => integrationWrite(id) && seen.filter((a) => a.status === 503).length >= 2,
            )
              ? true
              : undefined,
          60_000,
        ),
        failed,
      ]);
    } finally {
      cyclesAtResume.push(...crawlers.map((c) => c.cycles));
      sessionsAtResume = progress.sessions;
      resumed = true;
      redis.resume();
    }
    await Promise.all(running);

    // Every write was answered at last: the integration's reports too (none given up on).
    expect(warnings).toEqual([]);
    // Writes answered 503 and then, sent again with their request id, a success: the crawlers'
    // through the other replica too, the integration's by its client's own retries.
    const crawlersRetried = wire.retried((id) => !integrationWrite(id));
    expect(crawlersRetried.filter(({ ports }) => ports[0] === portA && ports.at(-1) === portB)).not.toEqual(
      [],
    );
    expect(wire.retried(integrationWrite)).not.toEqual([]);

    // 0 phantom leases, every ban and ok once (a replayed write counts twice), every batch
    // whole: the book as both replicas tell it is what the crawlers were answered.
    const expected = {
      raw: RAW.map((name) => {
        const id = `${namespace}/${name}`;
        const leases = [...ledger.held.values()].filter((l) => l.proxy.id === id).length;
        return { id, leases, banned: ledger.banned.get(id) ?? 0, ok: ledger.ok.get(id) ?? 0 };
      }),
      batchErrors: [],
    };
    for (const port of [portA, portB]) {
      const book = await fleet(port);
      const raw = RAW.map((name) => {
        const { id, activeLeases: leases, stats } = book.get(`${namespace}/${name}`)!;
        return { id, leases, banned: stats.banned, ok: stats.ok };
      });
      expect({ port, raw, batchErrors: ledger.batchErrors }).toEqual({ port, ...expected });
    }
    // One cooldown per ban, the one its answer named: a ban applied twice is a streak of two.
    const detail = clientOf(portB, 10);
    const cooldowns = [];
    for (const ban of ledger.bans) {
      const standing: ProxyDetail = await detail.getProxy(ban.proxyID, { target: ban.target });
      const cooling = standing.reasons.find((r) => r.code === 'cooling_down');
      const until = (cooling?.code === 'cooling_down' ? cooling.cooldowns : [])
        .filter((c) => c.target === ban.target)
        .map((c) => Date.parse(c.until));
      cooldowns.push({ ...ban, until });
    }
    expect(cooldowns).toEqual(ledger.bans.map((ban) => ({ ...ban, until: [ban.until] })));

    // The integration closes, releasing every lease it holds: none is left behind, and its
    // bans and oks are counted as its client was answered.
    await integration.close();
    expect(warnings).toEqual([]);
    const after = await fleet(portA);
    const crawlee = CRAWLEE.map((name) => after.get(`${namespace}/${name}`)!);
    expect({
      leases: crawlee.reduce((n, p) => n + p.activeLeases, 0),
      banned: crawlee.reduce((n, p) => n + p.stats.banned, 0),
      ok: crawlee.reduce((n, p) => n + p.stats.ok, 0),
    }).toEqual({ leases: 0, banned: integration.stats.reportedBanned, ok: integration.stats.okReports });
    expect(integration.stats.reportedBanned).toBeGreaterThan(0);
    // And in Redis itself (`{prefix}:lease:<owner>.<id>`, one key a live lease): the lease
    // keys are exactly the leases the crawlers were answered.
    const keys = await redis.client().keys('*}:lease:*');
    expect(keys.map((key) => unscopedKey(ANONYMOUS_OWNER, key.split('}:lease:')[1]!)).sort()).toEqual(
      [...ledger.held.keys()].sort(),
    );
  }, 300_000);
});

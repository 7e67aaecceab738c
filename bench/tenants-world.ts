// Two teams on one fleet (issue 48 item 6), shared by bench/tenants.ts and
// test/discovery/two-tenants.int.test.ts: a tokens file with two named tokens, and per round a
// fresh fleet of real forward proxies registered as External Proxies (rotation on bans armed,
// so a rotation would show) with its site (bench/crawl-world.ts). Tenant A crawls it through
// the Crawlee integration (tenants-round.ts); tenant B's attacks are below (run in a process of
// their own: tenant-b-process.ts). The operator process and the control plane are the caller's.
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { startLocalTarget, type LocalTarget } from '../cmd/demo/local-target.js';
import { GROUP, PLURAL, VERSION } from '../crds/proxy-types.js';
import { startLocalWorld, type RunningWorld } from './crawl-world.js';

/** A's sticky sessions' target: the one B must never see. */
export const A_TARGET = 'shop.example';
/** Every junk target B reports starts with this: /metrics must never carry it. */
export const JUNK_PREFIX = 'junk-';
/** Each Proxy rotates once it cools down on this many targets: B's junk bans alone would trip it. */
export const ROTATE_ON_TARGETS = 3;
/** Proxies per round's fleet. */
export const FLEET_SIZE = 10;

export interface TenantsWorld {
  namespace: string;
  probeTarget: LocalTarget;
  tokens: { a: string; b: string };
  /** The operator's flags for the tokens file. */
  tokenFlags: string[];
  /** A fresh fleet and site for one run of A's crawl (its ban and its dead proxy are its own). */
  newRound(label: string, opts: RoundOptions): Promise<Round>;
  close(): Promise<void>;
}

export interface RoundOptions {
  pages: number;
  /** The fleet's first loopback address (one address per proxy: the site tells them apart). */
  first: string;
  /** Slots per proxy: enough that B at its lease quota (1,000) still leaves A room. */
  maxLeases: number;
  /** Requests per second the site allows one source (bench:crawl's scenario 1: 50). */
  rateLimitPerSecond: number;
}

export interface Round {
  world: RunningWorld;
  selector: Record<string, string>;
  proxyNames: string[];
  /** The discovery id of fleet proxy i. */
  proxyID(i: number): string;
  /** Deletes the round's Proxies (and waits until the API lists none) and stops its fleet and site. */
  close(discoveryURL: string, bearer: string): Promise<void>;
}

const token = () => randomBytes(24).toString('hex');

export async function startTenantsWorld(kc: KubeConfig, namespace: string): Promise<TenantsWorld> {
  const dir = await mkdtemp(join(tmpdir(), 'tenants-'));
  const tokens = { a: token(), b: token() };
  const tokensFile = join(dir, 'tokens');
  await writeFile(tokensFile, `team-a: ${tokens.a}\nteam-b: ${tokens.b}\n`, { mode: 0o600 });
  const probeTarget = await startLocalTarget();
  const rounds: Round[] = [];
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const api = kc.makeApiClient(CustomObjectsApi);
  const newRound = async (label: string, o: RoundOptions): Promise<Round> => {
    const world = await startLocalWorld({
      proxies: FLEET_SIZE,
      first: o.first,
      pages: o.pages,
      rateLimitPerSecond: o.rateLimitPerSecond,
      retryAfterSeconds: 1,
    });
    const selector = { team: 'shared', run: `${namespace}-${label}` };
    const proxyNames = world.hosts.map((_, i) => `${label}-${i}`);
    for (const [i, host] of world.hosts.entries()) {
      await api.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: PLURAL,
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: 'Proxy',
          metadata: { name: proxyNames[i], namespace },
          spec: {
            mode: 'External',
            endpoint: { host, port: world.ports[i] },
            maxLeases: o.maxLeases,
            attributes: selector,
            healthCheck: { probeURL: probeTarget.probeURL, intervalSeconds: 5, timeoutSeconds: 2 },
            rotation: { whenCoolingDownOn: ROTATE_ON_TARGETS },
          },
        },
      });
    }
    const round: Round = {
      world,
      selector,
      proxyNames,
      proxyID: (i) => `${namespace}/${proxyNames[i]}`,
      close: async (discoveryURL, bearer) => {
        for (const name of proxyNames)
          await api
            .deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: PLURAL, name })
            .catch(() => undefined);
        // No later round shares the machine with an operator probing this round's dead fleet.
        for (let i = 0; i < 120; i++) {
          const got = await call(discoveryURL, bearer, 'GET', `/v1/proxies?${query(selector)}`).catch(
            () => undefined,
          );
          if (((got?.body.items as unknown[] | undefined) ?? [undefined]).length === 0) break;
          await new Promise((r) => setTimeout(r, 500));
        }
        await world.close();
        rounds.splice(rounds.indexOf(round), 1);
      },
    };
    rounds.push(round);
    return round;
  };
  return {
    namespace,
    probeTarget,
    tokens,
    tokenFlags: ['--discovery-tokens-file', tokensFile],
    newRound,
    close: async () => {
      await Promise.allSettled([probeTarget.close(), ...rounds.map((r) => r.world.close())]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const query = (selector: Record<string, string>) =>
  Object.entries(selector)
    .map(([k, v]) => `attr.${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function call(
  base: string,
  bearer: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
  dispatcher?: Agent,
): Promise<Answer> {
  const res = await request(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    ...(dispatcher ? { dispatcher } : {}),
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Waits until every Proxy of a round is leasable through the API (the token lists them healthy). */
export async function untilFleetHealthy(
  discoveryURL: string,
  bearer: string,
  round: Round,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await call(
      discoveryURL,
      bearer,
      'GET',
      `/v1/proxies?healthy=true&${query(round.selector)}`,
    ).catch(() => undefined);
    if (got !== undefined && got.status >= 400 && got.status < 500 && got.status !== 429)
      throw new Error(`listing the fleet: ${got.status} ${JSON.stringify(got.body)}`);
    const items = (got?.body.items as unknown[] | undefined) ?? [];
    if (items.length === round.proxyNames.length) return;
    if (Date.now() > deadline) throw new Error(`fleet not healthy: ${JSON.stringify(got?.body)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * A's sticky sessions, bound before B attacks and left idle: the least recently used entries
 * of the book, the first a global LRU would evict. Each lease is held while the next is taken,
 * so each session lands on another proxy (least-loaded first): an evicted session's next lease
 * lands on the least-loaded proxy, which is another than the one it left for all but one.
 * The first session's lease is reported banned for A_TARGET (a cooldown of A's for B to read).
 */
export async function bindStickySessions(
  discoveryURL: string,
  bearer: string,
  selector: Record<string, string>,
  prefix: string,
  count: number,
): Promise<Record<string, string>> {
  const boundTo: Record<string, string> = {};
  const held: string[] = [];
  for (let i = 0; i < count; i++) {
    const session = `${prefix}-${i}`;
    const a = await call(discoveryURL, bearer, 'POST', '/v1/leases', { selector, target: A_TARGET, session });
    if (a.status !== 201) throw new Error(`A's sticky lease: ${a.status} ${JSON.stringify(a.body)}`);
    boundTo[session] = (a.body.proxy as { id: string }).id;
    held.push(a.body.leaseID as string);
  }
  // A's own ban on its private target, whatever the crawl meets: the cooldown B must find
  // hidden when it reads the proxy (that session then moves, with `moved`, and is not counted).
  const ban = await call(discoveryURL, bearer, 'POST', `/v1/leases/${held.shift()!}/report`, {
    result: 'banned',
    release: true,
  });
  if (ban.status !== 200 || ban.body.capped === true)
    throw new Error(`A's ban on ${A_TARGET}: ${ban.status} ${JSON.stringify(ban.body)}`);
  for (const id of held) await call(discoveryURL, bearer, 'DELETE', `/v1/leases/${id}`);
  return boundTo;
}

/**
 * After B is done: one more lease (and release) in each of A's sticky sessions. Counts those
 * that came back bound to another proxy than A left them on without the API saying `moved`
 * (a move is the answer when the proxy left the pool, e.g. the round's dead one): a session
 * the book forgot (B evicted it) and bound afresh.
 */
export async function sessionsMovedSince(
  discoveryURL: string,
  bearer: string,
  selector: Record<string, string>,
  boundTo: Record<string, string>,
): Promise<number> {
  let rebound = 0;
  for (const [session, id] of Object.entries(boundTo)) {
    const a = await call(discoveryURL, bearer, 'POST', '/v1/leases', { selector, target: A_TARGET, session });
    if (a.status !== 201) throw new Error(`A's check lease: ${a.status} ${JSON.stringify(a.body)}`);
    const now = (a.body.proxy as { id: string }).id;
    if ((a.body.session as { moved?: boolean }).moved !== true && now !== id) rebound++;
    await call(discoveryURL, bearer, 'DELETE', `/v1/leases/${a.body.leaseID as string}`);
  }
  return rebound;
}

export interface TenantBFigures {
  /** Leases B held at once when the API said `lease_quota`. */
  held: number;
  leaseQuotaRefusals: number;
  reportItemsSent: number;
  /** Junk `banned` items answered without an error (each a cooldown B started or extended). */
  junkBansAccepted: number;
  /** Batches refused 429 cooldown_quota (a batch is all or nothing: none of its 100 recorded). */
  cooldownQuotaRefusals: number;
  reportQuotaRefusals: number;
  tooManyRequests: number;
  sessionsStarted: number;
  /** Every non-hidden cooldown target B read in GET /v1/proxies/{id}. */
  targetsSeen: string[];
  hiddenCooldownsSeen: number;
  proxyReads: number;
  /** Answers to the unauthenticated / bad-token spam, by status. */
  spam: Record<string, number>;
  /** Other statuses B got (a 500 would show here). */
  unexpected: Record<string, number>;
}

/**
 * Tenant B, with a valid token, attacks as fast as its limits allow until `stop()` (and until
 * it has sent `junkReports` junk bans and started `sessions` sessions): takes leases until
 * `lease_quota`, sends batches of `banned` reports on junk targets, churns sessions past its
 * session quota, reads every proxy, and spams bad tokens from another loopback address. Each
 * attack runs in its own loop, all at once.
 */
export async function attackAsTenantB(opts: {
  discoveryURL: string;
  token: string;
  selector: Record<string, string>;
  namespace: string;
  proxyNames: string[];
  stop: () => boolean;
  /** Sessions to start at least (past the session quota and past the book's --max-sessions). */
  sessions: number;
  /** Junk `banned` report items to send at least (the cooldown quota is 1,000). */
  junkReports: number;
  /** The address the bad-token spam comes from (loopback, not A's). */
  spamFrom: string;
  /** Called once B holds its quota of leases and the other attacks begin. */
  onAttacking?: () => void;
}): Promise<TenantBFigures> {
  const { discoveryURL: base, token: bearer, selector } = opts;
  const b: TenantBFigures = {
    held: 0,
    leaseQuotaRefusals: 0,
    reportItemsSent: 0,
    junkBansAccepted: 0,
    cooldownQuotaRefusals: 0,
    reportQuotaRefusals: 0,
    tooManyRequests: 0,
    sessionsStarted: 0,
    targetsSeen: [],
    hiddenCooldownsSeen: 0,
    proxyReads: 0,
    spam: {},
    unexpected: {},
  };
  const odd = (a: Answer) => {
    const key = `${a.status} ${String(a.body.error ?? '')}`;
    b.unexpected[key] = (b.unexpected[key] ?? 0) + 1;
  };
  const backOff = async (a: Answer): Promise<boolean> => {
    if (a.status !== 429) return false;
    const code = a.body.error;
    if (code === 'too_many_requests') b.tooManyRequests++;
    else if (code === 'report_quota') b.reportQuotaRefusals++;
    else if (code === 'lease_quota') b.leaseQuotaRefusals++;
    else odd(a);
    await new Promise((r) => setTimeout(r, 20));
    return true;
  };
  const held: string[] = [];

  // 1. Hold leases until the quota answers; keep them (their slots are A's loss, bounded).
  const hold = async () => {
    while (!opts.stop()) {
      const a = await call(base, bearer, 'POST', '/v1/leases', { selector, ttlSeconds: 300 });
      if (a.status === 201) held.push(a.body.leaseID as string);
      else if (a.status === 429 && a.body.error === 'lease_quota') {
        b.leaseQuotaRefusals++;
        b.held = held.length;
        return;
      } else if (!(await backOff(a))) {
        odd(a);
        return;
      }
    }
  };
  await hold();
  // Give back a tenth so the session churn below has slots under the lease quota (a release
  // refused by B's own rate limit is retried).
  const release = async (id: string) => {
    for (;;) {
      const a = await call(base, bearer, 'DELETE', `/v1/leases/${id}`);
      if (!(await backOff(a))) return;
    }
  };
  for (const id of held.splice(0, Math.ceil(held.length / 10))) await release(id);

  // 2. Junk bans, 100 per batch, spread over every held lease (every proxy).
  const junk = async () => {
    let n = 0;
    while ((!opts.stop() || n < opts.junkReports) && held.length > 0) {
      const reports = Array.from({ length: 100 }, (_, i) => ({
        leaseID: held[(n + i) % held.length],
        result: 'banned',
        target: `${JUNK_PREFIX}${n + i}.example`,
      }));
      const a = await call(base, bearer, 'POST', '/v1/reports', { reports });
      // A batch is all or nothing: one report past the cooldown quota refuses the 100 (a 429
      // naming it), and B moves on to its next junk batch.
      if (a.status === 429 && a.body.error === 'cooldown_quota') {
        n += reports.length;
        b.reportItemsSent += reports.length;
        b.cooldownQuotaRefusals++;
        continue;
      }
      if (await backOff(a)) continue;
      if (a.status !== 200) {
        odd(a);
        return;
      }
      n += reports.length;
      b.reportItemsSent += reports.length;
      for (const item of a.body.items as Array<{ error?: string }>) {
        if (item.error === undefined) b.junkBansAccepted++;
        else if (item.error === 'cooldown_quota') b.cooldownQuotaRefusals++;
        else if (item.error === 'report_quota') b.reportQuotaRefusals++;
        else odd({ status: 200, body: item });
      }
    }
  };

  // 3. Sessions: lease with a new key and release, past the session quota.
  const sessions = async (lane: number, lanes: number) => {
    for (let i = lane; i < opts.sessions || !opts.stop();) {
      const a = await call(base, bearer, 'POST', '/v1/leases', {
        selector,
        session: `b-${i}`,
        ttlSeconds: 30,
      });
      if (a.status === 201) {
        b.sessionsStarted++;
        await release(a.body.leaseID as string);
        i += lanes;
      } else if (!(await backOff(a))) {
        odd(a);
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  };

  // 4. Reading every proxy: cooldowns of others' targets must come back hidden.
  let attacking = true;
  const read = async () => {
    while (attacking && !opts.stop()) {
      for (const name of opts.proxyNames) {
        const a = await call(base, bearer, 'GET', `/v1/proxies/${opts.namespace}/${name}`);
        if (await backOff(a)) continue;
        if (a.status !== 200) {
          odd(a);
          continue;
        }
        b.proxyReads++;
        const text = JSON.stringify(a.body);
        for (const m of text.matchAll(/"target":"([^"]+)"/g))
          if (!m[1].startsWith(JUNK_PREFIX)) b.targetsSeen.push(m[1]);
        b.hiddenCooldownsSeen += (text.match(/"hidden":true/g) ?? []).length;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  // 5. Bad tokens from another address: limited per address before any hashing.
  const spam = async () => {
    const agent = new Agent({ connect: { localAddress: opts.spamFrom } });
    try {
      for (let i = 0; i < 400 || !opts.stop(); i++) {
        const a = await call(base, `bad-${i}-${'x'.repeat(40)}`, 'POST', '/v1/leases', {}, agent);
        const key = `${a.status} ${String(a.body.error ?? '')}`;
        b.spam[key] = (b.spam[key] ?? 0) + 1;
        if (a.status === 429) await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await agent.close();
    }
  };

  const lanes = 8;
  opts.onAttacking?.();
  const reading = read();
  await Promise.all([junk(), ...Array.from({ length: lanes }, (_, l) => sessions(l, lanes)), spam()]);
  attacking = false;
  await reading;
  for (const id of held) await release(id);
  return b;
}

/** The operator process's RSS now, in MiB (from /proc), or undefined once it is gone. */
export async function rssMiB(pid: number | undefined): Promise<number | undefined> {
  if (pid === undefined) return undefined;
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(text)?.[1];
  return kb === undefined ? undefined : Number(kb) / 1024;
}

/** Proxies whose status shows a rotation or replacement, and such Events in the namespace. */
export async function rotations(kc: KubeConfig, namespace: string): Promise<string[]> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const list = (await api.listNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: PLURAL,
  })) as {
    items: Array<{ metadata: { name: string }; status?: { conditions?: Array<{ reason?: string }> } }>;
  };
  const bad = /Rotat|Replac|Drain/;
  const found: string[] = [];
  for (const p of list.items)
    for (const c of p.status?.conditions ?? [])
      if (c.reason !== undefined && bad.test(c.reason))
        found.push(`${p.metadata.name}: condition ${c.reason}`);
  const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace });
  for (const e of events.items)
    if (e.reason !== undefined && bad.test(e.reason))
      found.push(`${e.involvedObject.name}: event ${e.reason}: ${e.message ?? ''}`);
  return found;
}

// Two teams on one fleet (issue 48 item 6), shared by bench/tenants.ts and
// test/discovery/two-tenants.int.test.ts: real forward proxies registered as External Proxies
// (rotation on bans armed, so a rotation would show), a site that answers 403 through one
// designated proxy, a tokens file with two named tokens, tenant A's crawl-like loop through
// the discovery API and tenant B's attacks, each counting what it saw. The operator process
// and the control plane are the caller's (the test's harness or the bench's).
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, ProxyAgent, request } from 'undici';
import { startLocalTarget, type LocalTarget } from '../cmd/demo/local-target.js';
import { GROUP, PLURAL, VERSION } from '../crds/proxy-types.js';
import { startCrawlSite, type CrawlSite } from './crawl-site.js';
import { startFleet, type Fleet } from './crawl-world.js';

/** A's crawl target: the one B must never see, and whose ban must hold. */
export const A_TARGET = 'shop.example';
/** Every junk target B reports starts with this: /metrics must never carry it. */
export const JUNK_PREFIX = 'junk-';
/** Each Proxy rotates once it cools down on this many targets: B's junk bans alone would trip it. */
export const ROTATE_ON_TARGETS = 3;

export interface TenantsWorld {
  namespace: string;
  fleet: Fleet;
  probeTarget: LocalTarget;
  tokens: { a: string; b: string };
  /** The operator's flags for the tokens file. */
  tokenFlags: string[];
  proxyNames: string[];
  selector: Record<string, string>;
  /** A fresh site for one run of A's loop (a run's ban is its own). */
  newSite(pages: number): Promise<CrawlSite>;
  close(): Promise<void>;
}

export interface WorldOptions {
  proxies: number;
  /** Slots per proxy: enough that B at its lease quota (1,000) still leaves A room. */
  maxLeases: number;
  /** The first loopback address of the fleet (one address per proxy: the site tells them apart). */
  firstAddress: string;
}

const token = () => randomBytes(24).toString('hex');

export async function startTenantsWorld(
  kc: KubeConfig,
  namespace: string,
  { proxies, maxLeases, firstAddress }: WorldOptions,
): Promise<TenantsWorld> {
  const dir = await mkdtemp(join(tmpdir(), 'tenants-'));
  const tokens = { a: token(), b: token() };
  const tokensFile = join(dir, 'tokens');
  await writeFile(tokensFile, `team-a: ${tokens.a}\nteam-b: ${tokens.b}\n`, { mode: 0o600 });
  const probeTarget = await startLocalTarget();
  const fleet = await startFleet(proxies, firstAddress);
  const sites: CrawlSite[] = [];
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const api = kc.makeApiClient(CustomObjectsApi);
  const selector = { team: 'shared', run: namespace };
  const proxyNames = fleet.proxies.map((_, i) => `proxy-${i}`);
  for (const [i, p] of fleet.proxies.entries()) {
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
          endpoint: { host: p.host, port: p.port },
          maxLeases,
          attributes: selector,
          healthCheck: { probeURL: probeTarget.probeURL, intervalSeconds: 5, timeoutSeconds: 2 },
          rotation: { whenCoolingDownOn: ROTATE_ON_TARGETS },
        },
      },
    });
  }
  return {
    namespace,
    fleet,
    probeTarget,
    tokens,
    tokenFlags: ['--discovery-tokens-file', tokensFile],
    proxyNames,
    selector,
    newSite: async (pages) => {
      const site = await startCrawlSite({ pages });
      sites.push(site);
      return site;
    },
    close: async () => {
      await Promise.allSettled([fleet.close(), probeTarget.close(), ...sites.map((s) => s.close())]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

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

/** Waits until every Proxy of the world is leasable through the API (A's token lists them healthy). */
export async function untilFleetHealthy(discoveryURL: string, world: TenantsWorld, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  const query = Object.entries(world.selector)
    .map(([k, v]) => `attr.${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  for (;;) {
    const got = await call(discoveryURL, world.tokens.a, 'GET', `/v1/proxies?healthy=true&${query}`).catch(
      () => undefined,
    );
    if (got !== undefined && got.status >= 400 && got.status < 500 && got.status !== 429)
      throw new Error(`listing the fleet: ${got.status} ${JSON.stringify(got.body)}`);
    const items = (got?.body.items as unknown[] | undefined) ?? [];
    if (items.length === world.proxyNames.length) return;
    if (Date.now() > deadline) throw new Error(`fleet not healthy: ${JSON.stringify(got?.body)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

export interface TenantAFigures {
  pages: number;
  /** Fetches through a proxy (every attempt, 403s included). */
  requests: number;
  /** A's `banned` reports (each a 403 through the designated proxy). */
  bans: number;
  /** Leases of the banned proxy for A_TARGET after A's ban was recorded. */
  leasedBannedAfterBan: number;
  /** A's requests through the banned proxy begun after A's ban was recorded. */
  requestsThroughBannedAfterBan: number;
  /** A session answered `moved` (or bound elsewhere) without its own ban before: B's doing. */
  sessionsMovedByOthers: number;
  /** Moves right after the session's own ban (expected). */
  movesAfterOwnBan: number;
  /** Reports that were not a 200 (a capped or refused ban would show here). */
  reportsRefused: number;
  seconds: number;
  pagesPerSecond: number;
  /** The proxy (host) each session was last bound to. */
  boundTo: Record<string, string>;
}

/**
 * Tenant A: `workers` sessions crawl `pages` pages for A_TARGET, each page: lease (with the
 * session), fetch through the proxy, report ok or banned (with release). The first proxy
 * leased is the designated banned one: the site answers 403 through it from then on.
 */
export async function crawlAsTenantA(opts: {
  discoveryURL: string;
  token: string;
  selector: Record<string, string>;
  site: CrawlSite;
  workers: number;
  sessionPrefix: string;
}): Promise<TenantAFigures> {
  const { discoveryURL, token: bearer, selector, site } = opts;
  const queue = site.pages.map((_, i) => i);
  const agents = new Map<string, ProxyAgent>();
  const agentFor = (url: string) => {
    let a = agents.get(url);
    if (!a) agents.set(url, (a = new ProxyAgent({ uri: url, keepAliveTimeout: 1_000 })));
    return a;
  };
  let bannedHost: string | undefined;
  let bannedAt: number | undefined;
  const f = { pages: 0, requests: 0, bans: 0, leasedBannedAfterBan: 0, sessionsMovedByOthers: 0 };
  let movesAfterOwnBan = 0;
  let reportsRefused = 0;
  let requestsThroughBannedAfterBan = 0;
  const boundTo: Record<string, string> = {};
  const started = Date.now();
  const worker = async (w: number) => {
    const session = `${opts.sessionPrefix}-${w}`;
    let boundHost: string | undefined;
    let ownBan = false;
    for (let guard = 0; queue.length > 0 && guard < 100_000; guard++) {
      const page = queue.shift()!;
      const lease = await call(discoveryURL, bearer, 'POST', '/v1/leases', {
        selector,
        target: A_TARGET,
        session,
        ttlSeconds: 60,
      });
      if (lease.status !== 201) {
        // A's lease refused (all busy: B holds slots): a real loss for A, retried after a pause.
        queue.unshift(page);
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const proxy = lease.body.proxy as { url: string };
      const host = new URL(proxy.url).hostname;
      const moved = (lease.body.session as { moved?: boolean } | undefined)?.moved === true;
      if (bannedHost === undefined) {
        bannedHost = host;
        site.ban(host);
      }
      if (bannedAt !== undefined && host === bannedHost) f.leasedBannedAfterBan++;
      if (moved || (boundHost !== undefined && boundHost !== host)) {
        if (ownBan) movesAfterOwnBan++;
        else f.sessionsMovedByOthers++;
      }
      boundHost = host;
      boundTo[session] = host;
      ownBan = false;
      f.requests++;
      if (bannedAt !== undefined && host === bannedHost) requestsThroughBannedAfterBan++;
      const res = await request(site.pages[page], { dispatcher: agentFor(proxy.url) });
      await res.body.dump();
      const result = res.statusCode === 403 ? 'banned' : 'ok';
      if (res.statusCode === 200) f.pages++;
      else queue.push(page);
      const report = await call(
        discoveryURL,
        bearer,
        'POST',
        `/v1/leases/${lease.body.leaseID as string}/report`,
        {
          result,
          release: true,
        },
      );
      if (report.status !== 200 || report.body.capped === true) reportsRefused++;
      if (result === 'banned') {
        f.bans++;
        ownBan = true;
        bannedAt ??= Date.now();
      }
    }
  };
  await Promise.all(Array.from({ length: opts.workers }, (_, w) => worker(w)));
  const seconds = (Date.now() - started) / 1000;
  await Promise.allSettled([...agents.values()].map((a) => a.close()));
  return {
    ...f,
    requestsThroughBannedAfterBan,
    movesAfterOwnBan,
    reportsRefused,
    boundTo,
    seconds,
    pagesPerSecond: f.pages / seconds,
  };
}

/**
 * After B is done: one more lease (and release) in each of A's sessions. Counts the sessions
 * that moved or came back bound to another proxy than A left them on (B evicted them).
 */
export async function sessionsMovedSince(
  discoveryURL: string,
  bearer: string,
  selector: Record<string, string>,
  boundTo: Record<string, string>,
): Promise<number> {
  let moved = 0;
  for (const [session, host] of Object.entries(boundTo)) {
    const a = await call(discoveryURL, bearer, 'POST', '/v1/leases', { selector, target: A_TARGET, session });
    if (a.status !== 201) throw new Error(`A's check lease: ${a.status} ${JSON.stringify(a.body)}`);
    const now = new URL((a.body.proxy as { url: string }).url).hostname;
    if ((a.body.session as { moved?: boolean }).moved === true || now !== host) moved++;
    await call(discoveryURL, bearer, 'DELETE', `/v1/leases/${a.body.leaseID as string}`);
  }
  return moved;
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
 * Tenant B, with a valid token, attacks as fast as its limits allow until `stop()`: takes
 * leases until `lease_quota`, sends batches of `banned` reports on junk targets, churns
 * sessions past its session quota, reads every proxy, and spams bad tokens from another
 * loopback address. Each attack runs in its own loop, all at once.
 */
export async function attackAsTenantB(opts: {
  discoveryURL: string;
  token: string;
  selector: Record<string, string>;
  namespace: string;
  proxyNames: string[];
  stop: () => boolean;
  /** Sessions to start (the session quota is 10,000). */
  sessions: number;
  /** Junk `banned` report items to send (the cooldown quota is 1,000). */
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
    while (!opts.stop() && n < opts.junkReports && held.length > 0) {
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
    for (let i = lane; i < opts.sessions && !opts.stop();) {
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
      for (let i = 0; i < 400 && !opts.stop(); i++) {
        const a = await call(base, `bad-${i}-${'x'.repeat(40)}`, 'POST', '/v1/leases', {}, agent);
        const key = `${a.status} ${String(a.body.error ?? '')}`;
        b.spam[key] = (b.spam[key] ?? 0) + 1;
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

// The real discovery API (createDiscoveryApp + MemoryLeaseStore + DiscoveryServer, real clock)
// on loopback over a catalog the test controls, for the client's suites. It records every
// call and its JSON answer, so tests can assert what the server understood.
//
// Issue 13 (sessions, renewal, single-proxy GET, stats) is built on another branch and
// changes the store's and the catalog's constructors. Until it is on main, this harness
// compiles against both shapes (the few calls that differ go through the small structural
// types below), and a thin shim in front of the real app serves issue 13's additions as
// /work/team/discovery-contract.md pins them. The shim turns itself off when the served
// document has the renew route (`CONTRACT_SHIM`); once issue 13 is merged, delete it and the
// structural types, and construct TestCatalog / MemoryLeaseStore({ catalog, … }) directly.
import express, { type Express, type Response } from 'express';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../../discovery/app.js';
import type { ProxyCatalog, ProxyRecord } from '../../discovery/catalog.js';
import { MemoryLeaseStore, type MemoryLeaseStoreOptions } from '../../discovery/memory-lease-store.js';
import { openApiDocument } from '../../discovery/openapi.js';
import { proxyURL } from '../../discovery/proxy-view.js';
import { DiscoveryServer } from '../../discovery/server.js';
import * as fixtures from '../discovery/fixtures.js';

/** True while the server lacks issue 13's routes and the shim stands in for them. */
export const CONTRACT_SHIM = !('/v1/leases/{id}/renew' in openApiDocument.paths);

/** The test's catalog: assigning `proxies` replaces its content (both catalog shapes allow it). */
export interface ControlledCatalog {
  proxies: ProxyRecord[];
  list(): readonly ProxyRecord[];
}

/** The store calls this harness makes that differ before and after issue 13. */
interface StoreCounts {
  totals?: () => Promise<{ activeLeases: number }>;
  activeTotal?: () => Promise<number>;
  activeCount?: (proxyID: string) => Promise<number>;
  close?: () => void;
}

export interface TestDiscoveryServer {
  baseUrl: string;
  catalog: ControlledCatalog;
  store: MemoryLeaseStore;
  /** Every request the API received, in order: `METHOD /path` and the JSON answer. */
  requests: { call: string; response?: unknown }[];
  /** Live leases across all proxies. */
  activeLeases(): Promise<number>;
  stop(): Promise<void>;
}

export async function startDiscoveryServer(
  options: { proxies?: ProxyRecord[]; token?: string; cooldownSeconds?: number; maxTTLSeconds?: number } = {},
): Promise<TestDiscoveryServer> {
  const exported = fixtures as Record<string, unknown>;
  const Catalog = (exported.TestCatalog ?? exported.FakeCatalog) as new (
    proxies: ProxyRecord[],
  ) => ControlledCatalog;
  const catalog = new Catalog(options.proxies ?? []);
  const store = new MemoryLeaseStore({
    catalog,
    logger: fixtures.silentLogger,
    cooldownSeconds: options.cooldownSeconds ?? 900,
  } as unknown as MemoryLeaseStoreOptions);
  const counts = store as unknown as StoreCounts;
  const real = createDiscoveryApp({
    catalog: catalog as unknown as ProxyCatalog,
    leases: store,
    token: options.token,
    logger: fixtures.silentLogger,
    registry: new Registry(),
    maxTTLSeconds: options.maxTTLSeconds ?? 3600,
  });
  const requests: TestDiscoveryServer['requests'] = [];
  const app = express();
  // Records the call and its JSON answer (from the bytes written, however the app serializes);
  // the request stream is left to the real app.
  app.use((req, res, next) => {
    const entry: TestDiscoveryServer['requests'][number] = { call: `${req.method} ${req.path}` };
    requests.push(entry);
    const chunks: Buffer[] = [];
    const keep = (chunk: unknown, encoding?: unknown) => {
      if (typeof chunk === 'string') chunks.push(Buffer.from(chunk, encoding as BufferEncoding | undefined));
      else if (chunk instanceof Uint8Array) chunks.push(Buffer.from(chunk));
    };
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      keep(chunk, typeof rest[0] === 'string' ? rest[0] : undefined);
      return write(chunk, ...rest);
    }) as Response['write'];
    res.end = ((chunk?: unknown, ...rest: unknown[]) => {
      if (typeof chunk !== 'function') keep(chunk, typeof rest[0] === 'string' ? rest[0] : undefined);
      const text = Buffer.concat(chunks).toString('utf8');
      if (String(res.getHeader('content-type') ?? '').startsWith('application/json') && text !== '') {
        try {
          entry.response = JSON.parse(text) as unknown;
        } catch {
          entry.response = text;
        }
      }
      return end(chunk, ...rest);
    }) as Response['end'];
    next();
  });
  if (CONTRACT_SHIM) {
    app.use(express.json({ type: () => true }));
    contractShim(app, catalog, store, counts, options.token);
  }
  app.use(real);
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, fixtures.silentLogger);
  await server.start();
  await store.start();
  return {
    baseUrl: server.url,
    catalog,
    store,
    requests,
    activeLeases: async () =>
      counts.totals ? (await counts.totals()).activeLeases : (counts.activeTotal?.() ?? Promise.resolve(-1)),
    stop: async () => {
      await store.stop();
      counts.close?.();
      await server.stop();
    },
  };
}

const STATS = { windowSeconds: 300, ok: 0, banned: 0, rate_limited: 0 };

/** Issue 13's routes and fields over the real (pre-issue-13) store; the rest falls through. */
function contractShim(
  app: Express,
  catalog: ControlledCatalog,
  store: MemoryLeaseStore,
  counts: StoreCounts,
  token?: string,
): void {
  const authorized = (authorization: string | undefined) => !token || authorization === `Bearer ${token}`;
  const sessions = new Map<string, string>();
  const error = (res: Response, status: number, code: string, message: string) =>
    void res.status(status).json({ error: code, message });
  const active = (proxyID: string) => counts.activeCount?.(proxyID) ?? Promise.resolve(0);
  const view = async (p: ProxyRecord) => {
    const { id, ip, port, attributes, phase, healthy, latencyMillis, maxLeases } = p;
    const activeLeases = await active(id);
    return { id, ip, port, attributes, phase, healthy, latencyMillis, activeLeases, maxLeases, stats: STATS };
  };

  app.post('/v1/leases', (req, res, next) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const session = body.session;
    if (session === undefined) return next();
    if (typeof session !== 'string' || !/^[A-Za-z0-9._:@-]{1,128}$/.test(session)) {
      return error(res, 400, 'invalid_request', 'session must be 1..128 of [A-Za-z0-9._:@-]');
    }
    delete body.session;
    const json = res.json.bind(res);
    res.json = (lease: { proxy?: { id: string } }) => {
      if (res.statusCode !== 201 || lease.proxy === undefined) return json(lease);
      const before = sessions.get(session);
      sessions.set(session, lease.proxy.id);
      return json({
        ...lease,
        session: { key: session, moved: before !== undefined && before !== lease.proxy.id },
      });
    };
    next();
  });
  app.post('/v1/leases/:id/renew', async (req, res) => {
    if (!authorized(req.headers.authorization)) return error(res, 401, 'unauthorized', 'bad token');
    const lease = (await store.get(req.params.id)) as
      { id: string; proxyID: string; expiresAt: Date; target?: string } | undefined;
    if (lease === undefined) return error(res, 404, 'lease_not_found', `lease '${req.params.id}' is gone`);
    const ttl = (req.body as { ttlSeconds?: number } | undefined)?.ttlSeconds ?? 300;
    lease.expiresAt = new Date(Date.now() + ttl * 1000);
    const proxy = catalog.list().find((p) => p.id === lease.proxyID)!;
    res.json({
      leaseID: lease.id,
      proxy: { ...(await view(proxy)), url: proxyURL(proxy.ip, proxy.port) },
      expiresAt: lease.expiresAt.toISOString(),
      target: lease.target ?? null,
    });
  });
  app.delete('/v1/sessions/:key', (req, res) => {
    if (!authorized(req.headers.authorization)) return error(res, 401, 'unauthorized', 'bad token');
    sessions.delete(req.params.key);
    res.status(204).end();
  });
  app.get('/v1/proxies/:namespace/:name', async (req, res) => {
    if (!authorized(req.headers.authorization)) return error(res, 401, 'unauthorized', 'bad token');
    const proxy = catalog.list().find((p) => p.id === `${req.params.namespace}/${req.params.name}`);
    if (proxy === undefined) return error(res, 404, 'proxy_not_found', 'no such proxy');
    res.json(await view(proxy));
  });
  app.get('/v1/proxies', (_req, res, next) => {
    const json = res.json.bind(res);
    res.json = (body: { items?: object[] }) =>
      json(body.items ? { items: body.items.map((p) => ({ ...p, stats: STATS })) } : body);
    next();
  });
}

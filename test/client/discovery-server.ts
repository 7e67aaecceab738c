// The real discovery API (createDiscoveryApp + MemoryLeaseStore + DiscoveryServer, real clock)
// on loopback over a catalog the test controls, for the client's suites.
//
// Until issue 13 (sessions, renewal, single-proxy GET, stats) lands on main, a thin shim in
// front of the real app serves those additions as docs/../team discovery-contract.md pins
// them, so the client can be tested against its contract. `CONTRACT_SHIM` says whether it
// is in use; delete the shim once the real routes exist.
import express, { type Express, type Response } from 'express';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../../discovery/app.js';
import type { ProxyRecord } from '../../discovery/catalog.js';
import { MemoryLeaseStore } from '../../discovery/memory-lease-store.js';
import { openApiDocument } from '../../discovery/openapi.js';
import { toLeaseView, toProxyView } from '../../discovery/proxy-view.js';
import { DiscoveryServer } from '../../discovery/server.js';
import { FakeCatalog, silentLogger } from '../discovery/fixtures.js';

/** True while the server lacks issue 13's routes and the shim stands in for them. */
export const CONTRACT_SHIM = !('/v1/leases/{id}/renew' in openApiDocument.paths);

export interface TestDiscoveryServer {
  baseUrl: string;
  catalog: FakeCatalog;
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
  const catalog = new FakeCatalog(options.proxies ?? []);
  const store = new MemoryLeaseStore({
    logger: silentLogger,
    cooldownSeconds: options.cooldownSeconds ?? 900,
  });
  const real = createDiscoveryApp({
    catalog,
    leases: store,
    token: options.token,
    logger: silentLogger,
    registry: new Registry(),
    maxTTLSeconds: options.maxTTLSeconds ?? 3600,
  });
  const requests: TestDiscoveryServer['requests'] = [];
  const app = express();
  app.use((req, res, next) => {
    const entry: TestDiscoveryServer['requests'][number] = { call: `${req.method} ${req.path}` };
    requests.push(entry);
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      entry.response = body;
      return json(body);
    };
    next();
  });
  if (CONTRACT_SHIM) {
    app.use(express.json({ type: () => true }));
    contractShim(app, catalog, store, options.token);
  }
  app.use(real);
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, silentLogger);
  await server.start();
  await store.start();
  return {
    baseUrl: server.url,
    catalog,
    store,
    requests,
    activeLeases: () => store.activeTotal(),
    stop: async () => {
      await store.stop();
      await server.stop();
    },
  };
}

const STATS = { windowSeconds: 300, ok: 0, banned: 0, rate_limited: 0 };

/** Issue 13's routes and fields over the real store; the rest falls through to the real app. */
function contractShim(app: Express, catalog: FakeCatalog, store: MemoryLeaseStore, token?: string): void {
  const authorized = (authorization: string | undefined) => !token || authorization === `Bearer ${token}`;
  const sessions = new Map<string, string>();
  const error = (res: Response, status: number, code: string, message: string) =>
    void res.status(status).json({ error: code, message });

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
    const lease = await store.get(req.params.id);
    if (lease === undefined) return error(res, 404, 'lease_not_found', `lease '${req.params.id}' is gone`);
    const ttl = (req.body as { ttlSeconds?: number } | undefined)?.ttlSeconds ?? 300;
    lease.expiresAt = new Date(Date.now() + ttl * 1000);
    const proxy = catalog.list().find((p) => p.id === lease.proxyID)!;
    res.json(toLeaseView(lease, proxy, await store.activeCount(proxy.id)));
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
    res.json({ ...toProxyView(proxy, await store.activeCount(proxy.id)), stats: STATS });
  });
  app.get('/v1/proxies', (_req, res, next) => {
    const json = res.json.bind(res);
    res.json = (body: { items?: object[] }) =>
      json(body.items ? { items: body.items.map((p) => ({ ...p, stats: STATS })) } : body);
    next();
  });
}

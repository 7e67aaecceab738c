// The real discovery API (createDiscoveryApp + MemoryLeaseStore + DiscoveryServer, real clock)
// on loopback over a catalog the test controls, for the client's suites. It records every
// call and its JSON answer, so tests can assert what the server understood.
import type { ApiTokens } from '../../book/api-tokens.js';
import type { BucketLimits } from '../../discovery/token-bucket.js';
import express, { type Response } from 'express';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { createDiscoveryApp } from '../../discovery/app.js';
import type { ProxyRecord } from '../../book/catalog.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { DiscoveryServer } from '../../discovery/server.js';
import * as fixtures from '../book/fixtures.js';
import { TestCatalog } from '../book/fixtures.js';

export interface TestDiscoveryServer {
  baseUrl: string;
  catalog: TestCatalog;
  store: MemoryLeaseStore;
  /** Every request the API received, in order: `METHOD /path` and the JSON answer. */
  requests: { call: string; query: string; response?: unknown }[];
  /** Live leases across all proxies. */
  activeLeases(): Promise<number>;
  stop(): Promise<void>;
}

export async function startDiscoveryServer(
  options: {
    proxies?: ProxyRecord[];
    token?: string;
    /** Named tokens (one per team: leases belong to the token's name); takes precedence over `token`. */
    tokens?: ApiTokens;
    cooldownSeconds?: number;
    maxTTLSeconds?: number;
    rateLimit?: BucketLimits;
  } = {},
): Promise<TestDiscoveryServer> {
  const catalog = new TestCatalog(options.proxies ?? []);
  const store = new MemoryLeaseStore({
    catalog,
    logger: fixtures.silentLogger,
    cooldownSeconds: options.cooldownSeconds ?? 900,
  });
  const real = createDiscoveryApp({
    catalog,
    leases: store,
    token: options.token,
    ...(options.tokens ? { tokens: options.tokens } : {}),
    logger: fixtures.silentLogger,
    registry: new Registry(),
    maxTTLSeconds: options.maxTTLSeconds ?? 3600,
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
  });
  const requests: TestDiscoveryServer['requests'] = [];
  const app = express();
  // Records the call and its JSON answer (from the bytes written, however the app serializes);
  // the request stream is left to the real app.
  app.use((req, res, next) => {
    const entry: TestDiscoveryServer['requests'][number] = {
      call: `${req.method} ${req.path}`,
      query: req.originalUrl.slice(req.path.length),
    };
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
  app.use(real);
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0 }, fixtures.silentLogger);
  await server.start();
  await store.start();
  return {
    baseUrl: server.url,
    catalog,
    store,
    requests,
    activeLeases: async () => (await store.totals()).activeLeases,
    stop: async () => {
      await store.stop();
      store.close();
      await server.stop();
    },
  };
}

/** What an operator older than the client lacks: a request field, or a whole route. */
export type Predates = { field: string } | { route: string };

/**
 * An operator that predates a field or a route, in front of the real API: a report or a
 * lease request naming the field gets the 400 such an operator gave (its parser's "unknown field(s)"), a call to
 * the route its 404; everything else is passed through unchanged.
 */
export async function startPredatingFront(
  baseUrl: string,
  predates: Predates,
): Promise<{ baseUrl: string; refused: number; stop(): Promise<void> }> {
  const front = { baseUrl: '', refused: 0, stop: (): Promise<void> => Promise.resolve() };
  const refusal = (method: string | undefined, path: string, body: Buffer) => {
    if ('route' in predates) {
      return path === predates.route
        ? { status: 404, error: 'not_found', message: `no route for ${method} ${path}` }
        : undefined;
    }
    const named =
      (/\/report$/.test(path) || path === '/v1/leases') &&
      predates.field in (JSON.parse(body.toString() || '{}') as object);
    return named
      ? {
          status: 400,
          error: 'invalid_request',
          message: `unknown field(s) '${predates.field}'; allowed: result, target, retryAfterSeconds`,
        }
      : undefined;
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const refused = refusal(req.method, (req.url ?? '').split('?')[0]!, body);
      if (refused !== undefined) {
        front.refused++;
        res.writeHead(refused.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: refused.error, message: refused.message }));
        return;
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([name]) => name !== 'host' && name !== 'content-length'),
      ) as Record<string, string>;
      fetch(`${baseUrl}${req.url}`, { method: req.method, headers, ...(body.length ? { body } : {}) })
        .then(async (answer) => {
          const type = answer.headers.get('content-type');
          res.writeHead(answer.status, type ? { 'content-type': type } : {});
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  front.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  front.stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return front;
}

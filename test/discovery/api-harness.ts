// Starts the real discovery server on loopback (port 0) over a fake catalog, for HTTP suites.
import type pino from 'pino';
import { Registry } from 'prom-client';
import { request } from 'undici';
import type { ApiTokens } from '../../book/api-tokens.js';
import { createDiscoveryApp, type DiscoveryAppOptions } from '../../discovery/app.js';
import { registerBookMetrics } from '../../book/book-metrics.js';
import type { BucketLimits } from '../../discovery/token-bucket.js';
import type { ProxyRecord } from '../../book/catalog.js';
import type { LeaseStore } from '../../book/lease-store.js';
import type { PageBuffers } from '../../discovery/page-buffers.js';
import { MemoryLeaseStore, type MemoryLeaseStoreOptions } from '../../book/memory-lease-store.js';
import { DiscoveryServer, type DiscoveryServerOptions } from '../../discovery/server.js';
import { capturingLogger, FakeClock, TestCatalog } from '../book/fixtures.js';

export interface HarnessOptions {
  proxies?: ProxyRecord[];
  token?: string;
  /** Named tokens (live: tests replace them as a reload of the file would). */
  tokens?: ApiTokens;
  rateLimit?: BucketLimits;
  /** Lists one token may have in flight (the app's default when absent). */
  maxConcurrentLists?: number;
  /** The level the captured log keeps (default info). */
  logLevel?: pino.Level;
  maxTTLSeconds?: number;
  server?: Partial<DiscoveryServerOptions>;
  store?: Partial<MemoryLeaseStoreOptions>;
  /** The pool list pages are written into (tests that watch it). */
  pageBuffers?: PageBuffers;
  /** Puts a decorator between the app and the store (tests that watch every store call). */
  wrapStore?: (store: MemoryLeaseStore) => LeaseStore;
  /** The app's per-token quotas and per-address limit of failed authentications. */
  app?: Pick<DiscoveryAppOptions, 'quotas' | 'ledger' | 'failedAuthLimit' | 'metricsTargetNames'>;
}

export interface Harness {
  baseURL: string;
  catalog: TestCatalog;
  clock: FakeClock;
  store: MemoryLeaseStore;
  registry: Registry;
  logLines: () => Record<string, unknown>[];
  server: DiscoveryServer;
  call(method: string, path: string, options?: CallOptions): Promise<CallResult>;
  /** Live leases on one proxy, as the store counts them. */
  activeLeases(proxyID: string): Promise<number>;
  stop(): Promise<void>;
}

export interface CallOptions {
  body?: unknown;
  /** Sent as-is instead of JSON-encoding `body`. */
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
}

export interface CallResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON, or undefined for an empty body. */
  body: unknown;
  text: string;
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const clock = new FakeClock();
  const catalog = new TestCatalog(options.proxies ?? []);
  const { logger, lines } = capturingLogger(options.logLevel ?? 'info');
  // random 0.5 puts every cooldown in the middle of its jitter: exactly base × 2^(streak-1).
  const store = new MemoryLeaseStore({
    catalog,
    logger,
    clock,
    cooldownSeconds: 900,
    maxCooldownSeconds: 3600,
    random: () => 0.5,
    ...options.store,
  });
  const registry = new Registry();
  const app = createDiscoveryApp({
    catalog,
    leases: options.wrapStore?.(store) ?? store,
    token: options.token,
    ...(options.tokens === undefined ? {} : { tokens: options.tokens }),
    ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
    ...(options.maxConcurrentLists === undefined ? {} : { maxConcurrentLists: options.maxConcurrentLists }),
    ...(options.pageBuffers === undefined ? {} : { pageBuffers: options.pageBuffers }),
    logger,
    registry,
    maxTTLSeconds: options.maxTTLSeconds ?? 3600,
    clock: () => clock.now(),
    ...options.app,
  });
  // One process, so it exports the book's figures (the operator gates them on leading).
  registerBookMetrics(registry, store, () => true);
  const server = new DiscoveryServer(app, { host: '127.0.0.1', port: 0, ...options.server }, logger);
  await server.start();
  const baseURL = server.url;
  return {
    baseURL,
    catalog,
    clock,
    store,
    registry,
    logLines: lines,
    server,
    call: (method, path, callOptions) => call(baseURL, method, path, callOptions),
    activeLeases: async (proxyID) => (await store.usage([proxyID]))[0].activeLeases,
    stop: () => server.stop(),
  };
}

export async function call(
  baseURL: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | Buffer | undefined = options.rawBody;
  if (body === undefined && options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await request(`${baseURL}${path}`, { method, headers, body });
  const text = await response.body.text();
  const isJSON = String(response.headers['content-type'] ?? '').startsWith('application/json');
  return {
    status: response.statusCode,
    headers: response.headers,
    body: text !== '' && isJSON ? JSON.parse(text) : undefined,
    text,
  };
}

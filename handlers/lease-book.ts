import type { Logger } from 'pino';
import type { LeaseStore } from '../book/lease-store.js';
import type { LeaseBookRules } from '../book/lease-book-settings.js';
import { MemoryLeaseStore } from '../book/memory-lease-store.js';
import { CachedProxyCatalog } from './proxy-catalog.js';

/**
 * The lease book of one operator process: the proxies discovery reads (from the informer
 * cache) and the store of leases, sessions, cooldowns and holds. One per process, shared by
 * the discovery runner (which serves it) and the health runner (which hears its re-probe
 * requests and hands it the engine's verdicts as they happen).
 */
export interface LeaseBook {
  readonly proxies: CachedProxyCatalog;
  readonly store: LeaseStore;
}

/** Builds a store on the book's catalog; the default is the in-memory store. */
export type LeaseStoreFactory = (catalog: CachedProxyCatalog['catalog'], logger: Logger) => LeaseStore;

export function memoryLeaseStore(rules: LeaseBookRules): LeaseStoreFactory {
  return (catalog, logger) => new MemoryLeaseStore({ catalog, logger, ...rules });
}

export function createLeaseBook(factory: LeaseStoreFactory, logger: Logger): LeaseBook {
  const proxies = new CachedProxyCatalog();
  return { proxies, store: factory(proxies.catalog, logger) };
}

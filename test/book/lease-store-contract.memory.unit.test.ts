// The LeaseStore contract against the in-memory store (the embedded default).
import type { LeaseStore } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { describeLeaseStoreContract } from './lease-store-contract.js';

describeLeaseStoreContract({
  name: 'memory',
  create: (options) => new MemoryLeaseStore(options),
  dispose: (store: LeaseStore) => (store as MemoryLeaseStore).close(),
});

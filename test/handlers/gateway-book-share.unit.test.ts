// One book, two doors: the gateway's book calls take their turns in the process's fair share
// of the book (discovery/book-turns.ts), as the discovery API's do, so one token's gateway
// traffic cannot queue ahead of another token's calls. A real memory book; the share's one
// slot is held while the calls arrive, then given back, and the book's order is watched.
import { describe, expect, it } from '@jest/globals';
import type { LeaseStore } from '../../book/lease-store.js';
import { MemoryLeaseStore } from '../../book/memory-lease-store.js';
import { BookTurns } from '../../discovery/book-turns.js';
import { gatewayBook } from '../../handlers/gateway-book.js';
import { OPEN_POLICY } from '../../book/token-scope.js';
import { proxy, silentLogger, TestCatalog } from '../book/fixtures.js';

/** Leases team-b asks for 5 times, then team-a once; the owners in the order the book granted them. */
async function grantOrder(share: BookTurns | undefined): Promise<string[]> {
  const catalog = new TestCatalog([proxy('ns/p0', { maxLeases: 100, attributes: { pool: 'x' } })]);
  const store = new MemoryLeaseStore({ catalog, logger: silentLogger });
  const granted: string[] = [];
  const acquire = store.acquire.bind(store);
  store.acquire = async (request: Parameters<LeaseStore['acquire']>[0]) => {
    const result = await acquire(request);
    granted.push(request.owner ?? '');
    return result;
  };
  const book = gatewayBook(
    store,
    catalog,
    () => OPEN_POLICY,
    () => {},
    share,
  );
  // Another operation holds the share's one slot while the gateway's calls arrive.
  const busy = share?.enter('team-c', 1);
  const lease = (owner: string) =>
    book.lease({ owner, selector: { pool: 'x' }, ttlSeconds: 60, target: 'shop.example' });
  const calls = [...Array.from({ length: 5 }, () => lease('team-b')), lease('team-a')];
  if (busy !== undefined && busy !== 'book_queue_full') busy.leave();
  const results = await Promise.all(calls);
  expect(results.every((r) => r.granted)).toBe(true);
  return granted;
}

describe("the gateway's book calls", () => {
  it("take turns with other tokens': a token arriving behind another's 5 runs second, not last", async () => {
    // Without the share the book serves them as they came: team-a after all of team-b's.
    expect(await grantOrder(undefined)).toEqual(['team-b', 'team-b', 'team-b', 'team-b', 'team-b', 'team-a']);
    // queuedPerToken 2: the gateway's calls wait past it (their own numbers bound them).
    expect(await grantOrder(new BookTurns({ inFlight: 1, queuedPerToken: 2 }))).toEqual([
      'team-b',
      'team-a',
      'team-b',
      'team-b',
      'team-b',
      'team-b',
    ]);
  });
});

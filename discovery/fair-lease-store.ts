// The lease store as the discovery API's routes call it: each call that names its token takes
// a turn in the book's fair share (book-turns.ts) for as long as the book works on it, and no
// longer (not while the answer is written: a turn held across the response's write was the
// share's own bottleneck on a loaded machine). Calls without a token (the lists' usage, a
// proxy's standing, totals) and the health engine's go straight to the store.
import type { LeaseStore } from '../book/lease-store.js';
import { ApiError } from './api-error.js';
import type { BookTurns } from './book-turns.js';
import { operationCost } from './fair-share.js';
import { MAX_BATCH_REPORTS } from './request-parsing.js';

export function fairLeaseStore(
  store: LeaseStore,
  turns: BookTurns,
  onRefused: (token: string) => void,
  anonymous: string,
): LeaseStore {
  const inTurn = async <T>(owner: string | undefined, cost: number, call: () => Promise<T>): Promise<T> => {
    const who = owner ?? anonymous;
    const turn = turns.enter(who, cost);
    if (turn === 'book_queue_full') {
      onRefused(who);
      throw new ApiError(
        429,
        'book_queue_full',
        `token '${who}' has ${turns.limits.queuedPerToken} calls waiting for the lease book (its bound); retry after 1 s`,
        1,
      );
    }
    await turn.ready;
    try {
      return await call();
    } finally {
      turn.leave();
    }
  };
  return {
    acquire: (request) => inTurn(request.owner, 1, () => store.acquire(request)),
    renew: (leaseID, ttlSeconds, owner, requestID) =>
      inTurn(owner, 1, () => store.renew(leaseID, ttlSeconds, owner, requestID)),
    release: (leaseID, owner, requestID) => inTurn(owner, 1, () => store.release(leaseID, owner, requestID)),
    report: (leaseID, result, details, owner, requestID) =>
      inTurn(owner, 1, () => store.report(leaseID, result, details, owner, requestID)),
    reportMany: (reports, owner, requestID) =>
      inTurn(owner, operationCost(reports.length, MAX_BATCH_REPORTS), () =>
        store.reportMany(reports, owner, requestID),
      ),
    endSession: (key, owner) => inTurn(owner, 1, () => store.endSession(key, owner)),
    get: (leaseID, owner) => inTurn(owner, 1, () => store.get(leaseID, owner)),
    observeHealth: (proxyID, observation) => store.observeHealth(proxyID, observation),
    onProbeRequest: (listener) => store.onProbeRequest(listener),
    usage: (proxyIDs) => store.usage(proxyIDs),
    standing: (proxyID) => store.standing(proxyID),
    totals: () => store.totals(),
    start: () => store.start(),
    stop: () => store.stop(),
  };
}

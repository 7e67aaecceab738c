// How long requests wait for their turn at the lease book (book-turns.ts), by token name. One
// per process, like the share it watches: both doors (the API, the gateway) take turns in it.
import { Histogram, type Registry } from 'prom-client';

export const BOOK_WAIT_METRIC = 'proxy_operator_discovery_book_wait_seconds';

/** Registers the histogram on `registry`; the observer takes a token name and a wait in ms. */
export function bookWaitObserver(registry: Registry): (token: string, waitMs: number) => void {
  // By token name (the tokens file's, bounded): 9 series per token (7 buckets, sum, count).
  const waits = new Histogram({
    name: BOOK_WAIT_METRIC,
    help: "Time book calls (the discovery API's and the gateway's) waited for their turn at the lease book (the fair share among tokens, --discovery-book-concurrency), by token name: one token's backlog shows in its own series.",
    labelNames: ['token'],
    buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 2.5],
    registers: [registry],
  });
  return (token, waitMs) => waits.observe({ token }, waitMs / 1000);
}

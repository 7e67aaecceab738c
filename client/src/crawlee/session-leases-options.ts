// The options of the lease bookkeeping behind the Crawlee integration (SessionLeases), which
// ProxyOperatorConfiguration takes as they are.
import type { BackoffOptions } from '../backoff.js';
import type { DiscoveryClient } from '../client.js';
import type { Attributes } from '../types.js';
import type { LeaseLog } from './shared-lease.js';

export interface SessionLeasesOptions {
  client: DiscoveryClient;
  /** Attribute equality filter for every lease, e.g. `{ geo: 'eu' }`. Default: any proxy. */
  selector?: Attributes;
  /** TTL asked for each lease. Default 300 s. */
  ttlSeconds?: number;
  /**
   * When the server has nothing to lease (`no_match`, `all_cooling_down`, or `all_busy` with
   * no lease to share until `maxWaitMs`): `'throw'` fails the request (Crawlee retries it
   * later) or `'direct'` returns null, which Crawlee takes as "no proxy". Default `'throw'`.
   */
  whenNoneLeasable?: 'throw' | 'direct';
  /** How long to wait for a free slot when every proxy is full and no lease can be shared. Default 60 s. */
  maxWaitMs?: number;
  /**
   * Backoff between waits for a free slot (`retries`: at most this many waits, within
   * `maxWaitMs`); `false` fails at once. Default: 100 ms .. 2 s, as many as `maxWaitMs` allows.
   */
  retryAllBusy?: BackoffOptions | false;
  /** At most this many leases at once (then sessions share). Default: as many as the server grants. */
  maxLeases?: number;
  /**
   * Successes are reported as one `ok` per lease, for every lease at once in one call, this
   * many ms after the first success not yet reported (and each lease's last at its release).
   * Default 30,000.
   */
  okReportIntervalMs?: number;
  /** Forget a session on the server (DELETE /v1/sessions/{key}) when it retires. Default true. */
  endSessionOnRetire?: boolean;
  /**
   * A new session of a host that already has a live lease joins the least-shared one at once,
   * and a lease is asked for in the background for the sessions after it (at most two
   * waiting or in flight per host), instead of each new session waiting for its own lease
   * request. Default true; false: every new session waits for a lease of its own (keyed by its
   * session) until the server is full.
   */
  leaseAhead?: boolean;
  /**
   * A lease that sent a request and heard nothing back for this long (the crawler's error path
   * may not report a dead proxy) is checked with the server at once (a renewal, whose answer
   * carries the proxy's standing), and no new session joins it meanwhile. The check runs this
   * often too. Default 2,000 ms.
   */
  standingCheckMs?: number;
  log?: LeaseLog;
  /** Milliseconds since the epoch. */
  now?: () => number;
}

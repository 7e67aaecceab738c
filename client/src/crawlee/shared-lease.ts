// The shapes the lease bookkeeping's parts share: one server lease and the sessions on it, the
// keys bans, rests and paces are filed under, and the log and stats every part writes to.
import { createHash } from 'node:crypto';
import type { Lease } from '../types.js';
import type { Pace } from './site-pace.js';

/** Where the integration says what it did and what went wrong (Crawlee's `log` fits). */
export interface LeaseLog {
  debug(message: string, data?: Record<string, unknown>): void;
  warning(message: string, data?: Record<string, unknown>): void;
  /** A wiring mistake the crawl must not run with unnoticed (Crawlee's log has it; default: warning). */
  error?(message: string, data?: Record<string, unknown>): void;
}

export const silentLog: LeaseLog = { debug: () => undefined, warning: () => undefined };

/** One server lease and the sessions using it, for one host (readyLease hands one out). */
export interface SharedLease {
  /** The manager that granted it (a carrier handed to another is not its to count). */
  readonly owner: object;
  host: string | undefined;
  /** Its proxy and host, as bans, rests and paces are keyed (banKey). */
  readonly key: string;
  lease: Lease;
  /** The sessions using it (slotOf: no session is ''). */
  bindings: Set<string>;
  /** Until forget(): a live lease is shareable, renewed and counted. */
  live: boolean;
  /** ms since epoch the lease ends, by the server's clock as we read it. */
  expiresAt: number;
  /** The TTL the server granted last; renewal comes when a third of it is left. */
  ttlMs: number;
  usedSinceRenewal: boolean;
  /** Successes not yet reported. */
  unreportedOk: number;
  /** A page came back through it: until then it takes one session (see shareable). */
  carried: boolean;
  /**
   * When the oldest request sent through it since its last answer went (0: none waiting). A
   * lease silent a while is checked with the server (its standing) and joined by no new session.
   */
  unansweredSince: number;
  /** The pace of its proxy for its host, shared with the other leases of that pair. */
  readonly pace: PaceCell;
  timer?: NodeJS.Timeout;
}

/**
 * One (proxy, host)'s pace, held by each of its leases: every request and every success reads
 * and writes it, and a field is cheaper than a map lookup there (bench:crawl-path).
 */
export interface PaceCell {
  pace: Pace | undefined;
}

export interface SessionLeasesStats {
  leased: number;
  renewed: number;
  released: number;
  reportedBanned: number;
  reportedRateLimited: number;
  reportedUnreachable: number;
  /** ok reports sent; each stands for one or more successes. */
  okReports: number;
  /** Successes counted (what the ok reports summarise), also those whose lease ended mid-request. */
  successes: number;
  /** Times a session's next lease landed on another proxy (the server said `moved`). */
  moved: number;
  /** Times a new session shared a live lease because every proxy was full. */
  shared: number;
  /** all_busy answers seen (each one 409). */
  busy: number;
  /**
   * Requests that waited for a rest to end (a 429's rest on the session's own proxy, or every
   * proxy resting for the site), each counted once however long or often it waited.
   */
  paced: number;
  /** Milliseconds requests spent in those waits, summed. */
  pacedMs: number;
  /** Leases dropped because the server said their proxy is unhealthy, suspect or draining. */
  droppedByVerdict: number;
  /**
   * Leases asked for ahead that came back on a proxy the host already held (two asks in flight
   * at once got the same one), given back at once.
   */
  grantedTwice: number;
  /** 1 once a request was retried and the configuration's errorHandler had never run (it is not wired). */
  errorHandlerMissing: number;
}

export function emptyStats(): SessionLeasesStats {
  return {
    leased: 0,
    renewed: 0,
    released: 0,
    reportedBanned: 0,
    reportedRateLimited: 0,
    reportedUnreachable: 0,
    okReports: 0,
    successes: 0,
    moved: 0,
    shared: 0,
    busy: 0,
    paced: 0,
    pacedMs: 0,
    droppedByVerdict: 0,
    grantedTwice: 0,
    errorHandlerMissing: 0,
  };
}

/** One request's waits for the site's pace (counted once in stats.paced). */
export interface PacedWait {
  counted: boolean;
}

/**
 * The server's standing of a leased proxy (in every lease and renew answer) says it should
 * carry no more requests: unhealthy, held out of leases (suspect or down), draining or deleting.
 */
export function unfit(proxy: { healthy: boolean; phase: string; held?: string }): boolean {
  return (
    !proxy.healthy || proxy.held !== undefined || proxy.phase === 'Draining' || proxy.phase === 'Deleting'
  );
}

/** Runs background work to its end, logging a failure (close() waits for it). */
export type Track = (work: Promise<unknown>) => void;

/**
 * Whether a new session may join a lease while another lease could take it: not while no page
 * has come back through the lease and a session already waits on it. Crawlee's default pool
 * makes a new session per request, so a lease that arrived last (the least shared) drew the
 * next several requests at once, each a 403 when the site had banned its proxy: four per
 * banned proxy in bench:crawl, against one when the lease takes one request first.
 */
export function mayJoin(lease: {
  readonly carried: boolean;
  readonly bindings: { readonly size: number };
}): boolean {
  return lease.carried || lease.bindings.size === 0;
}

/** The key of a (session, host)'s acquisition in flight (not on the per-request path). */
export function bindingKey(session: string | undefined, host: string | undefined): string {
  return `${session ?? ''}\0${host ?? ''}`;
}

export function hostKey(host: string | undefined): string {
  return host ?? '';
}

export function banKey(proxyID: string, host: string | undefined): string {
  return `${proxyID}\0${host ?? ''}`;
}

const SESSION_KEY = /^[A-Za-z0-9._:@-]{1,128}$/;

/** Crawlee's ids (`session_AbC123xyz0`) fit the server's pattern; anything else is hashed to fit. */
export function sessionKey(session: string): string {
  return SESSION_KEY.test(session)
    ? session
    : `h:${createHash('sha256').update(session).digest('hex').slice(0, 40)}`;
}

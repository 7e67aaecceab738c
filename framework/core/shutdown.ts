// The order of a graceful stop, apart from the operator that owns the parts: each step is
// bounded, so a hung handler, hook, watch or Lease call never holds the process past
// shutdownBudgetSeconds(). A test runs it with every part hung to check that bound.
import type { Logger } from 'pino';
import { errorMessage } from '../utils/logger.js';
import { sleep } from '../utils/sleep.js';

/** How long stop() lets in-flight handlers finish (and daemons close) before aborting them. */
export const DEFAULT_SHUTDOWN_GRACE_SECONDS = 30;

/** The other bounded steps of stop(), in seconds, after the grace period. */
export const SHUTDOWN_BOUNDS = {
  /** Handlers and daemons still running once their signal is aborted. */
  afterAbort: 5,
  /** Every @onCleanup hook together (providers are closed there). */
  cleanup: 10,
  informers: 5,
  /** Releasing the leader Lease (a GET and a PUT, each under this deadline). */
  leaseRelease: 5,
} as const;

/**
 * The longest a graceful stop() can take with this grace period: what a Pod's
 * terminationGracePeriodSeconds must exceed so the Lease is released before the kubelet kills it.
 */
export function shutdownBudgetSeconds(shutdownGraceSeconds = DEFAULT_SHUTDOWN_GRACE_SECONDS): number {
  return (
    shutdownGraceSeconds +
    SHUTDOWN_BOUNDS.afterAbort +
    SHUTDOWN_BOUNDS.cleanup +
    SHUTDOWN_BOUNDS.informers +
    SHUTDOWN_BOUNDS.leaseRelease
  );
}

/** What a graceful stop stops, in the order it stops them. */
export interface ShutdownParts {
  /** Drains in-flight handlers and stops daemons and timers (both started at once). */
  drainAndStopDaemons(): Promise<unknown>;
  /** Aborts the handlers' and daemons' signal once the grace is over. */
  abortHandlers(): void;
  /** Runs every @onCleanup hook under `signal`. */
  cleanup(signal: AbortSignal): Promise<unknown>;
  stopInformers(): Promise<unknown>;
  /** Releases the leader Lease, each API call under `seconds`; undefined when not campaigning. */
  releaseLease(seconds: number): Promise<unknown> | undefined;
  closeProbe(): Promise<void>;
}

/** Waits `ms` or until `signal` aborts; tests pass one that does not wait. */
export type Wait = (ms: number, signal: AbortSignal) => Promise<void>;

/**
 * Daemons and timers are aborted at once; in-flight handlers get the grace period, then their
 * signal is aborted too; cleanup hooks, informers and the lease release are each bounded.
 */
export async function stopInOrder(
  parts: ShutdownParts,
  graceSeconds: number,
  logger: Logger,
  wait: Wait = sleep,
): Promise<void> {
  const bounded = (what: string, work: Promise<unknown> | undefined, seconds: number) =>
    boundedWait(what, work, seconds, logger, wait);
  const work = parts.drainAndStopDaemons();
  await bounded('draining handlers and stopping daemons', work, graceSeconds);
  parts.abortHandlers();
  await bounded('handlers and daemons after their abort', work, SHUTDOWN_BOUNDS.afterAbort);
  await bounded(
    'cleanup hooks',
    parts.cleanup(AbortSignal.timeout(SHUTDOWN_BOUNDS.cleanup * 1000)),
    SHUTDOWN_BOUNDS.cleanup,
  );
  await bounded('informers', parts.stopInformers(), SHUTDOWN_BOUNDS.informers);
  await bounded(
    'the leader Lease release',
    parts.releaseLease(SHUTDOWN_BOUNDS.leaseRelease),
    SHUTDOWN_BOUNDS.leaseRelease,
  );
  await parts.closeProbe();
  logger.info('operator stopped');
}

/** Waits for `work` at most `seconds`; what does not finish in time is logged and left behind. */
async function boundedWait(
  what: string,
  work: Promise<unknown> | undefined,
  seconds: number,
  logger: Logger,
  wait: Wait,
): Promise<void> {
  if (!work) return;
  const timeUp = new AbortController();
  const finished = await Promise.race([
    work.then(
      () => true,
      (err: unknown) => (logger.warn({ err: errorMessage(err), what }, 'error while stopping'), true),
    ),
    wait(seconds * 1000, timeUp.signal).then(() => false),
  ]);
  timeUp.abort();
  if (!finished)
    logger.error({ what, waitedSeconds: seconds }, 'stopping went on without it: it did not finish in time');
}

// Retry delays for `all_busy`: "full jitter" exponential backoff, the delay drawn uniformly
// from [0, min(max, base * 2^attempt)], so many crawlers waiting on one busy pool spread out
// instead of retrying in lockstep.

export interface BackoffOptions {
  /** Retries after the first attempt (so `retries + 1` attempts in all). */
  retries: number;
  /** Cap of the first retry's delay. Default 100 ms. */
  baseDelayMs?: number;
  /** No delay is longer than this. Default 5,000 ms. */
  maxDelayMs?: number;
}

export const BACKOFF_DEFAULTS = { baseDelayMs: 100, maxDelayMs: 5_000 } as const;

/** The delay before retry number `retry` (0-based); `random` returns [0, 1). */
export function backoffDelayMs(
  retry: number,
  options: Pick<BackoffOptions, 'baseDelayMs' | 'maxDelayMs'>,
  random: () => number = Math.random,
): number {
  const base = options.baseDelayMs ?? BACKOFF_DEFAULTS.baseDelayMs;
  const max = options.maxDelayMs ?? BACKOFF_DEFAULTS.maxDelayMs;
  // 2^retry overflows to Infinity long after min() has picked max; no special case needed.
  const ceiling = Math.min(max, base * 2 ** retry);
  return Math.floor(random() * ceiling);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

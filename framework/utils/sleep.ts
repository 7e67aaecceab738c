/** The longest delay one Node timer holds (2^31-1 ms, 24.8 days): a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A pending `longTimeout`. */
export interface LongTimeout {
  cancel(): void;
}

/**
 * setTimeout for any delay: beyond MAX_TIMER_MS it waits in chained timers of at most that,
 * so a requeue or sleep of 30 days waits 30 days instead of firing at once (and again, and
 * again: a hot loop).
 */
export function longTimeout(fn: () => void, ms: number): LongTimeout {
  let left = Math.max(0, ms) || 0; // NaN: at once, as setTimeout does
  let timer: NodeJS.Timeout;
  const arm = () => {
    const step = Math.min(left, MAX_TIMER_MS);
    left -= step;
    timer = setTimeout(() => (left > 0 ? arm() : fn()), step);
  };
  arm();
  return { cancel: () => clearTimeout(timer) };
}

/** Resolves after `ms`, or early (without rejecting) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = longTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** `sleep` and `stopped` bound to one signal; `stopped` adds its listener only when asked for. */
export function stoppable(signal: AbortSignal): {
  signal: AbortSignal;
  readonly stopped: Promise<void>;
  sleep(ms: number): Promise<boolean>;
} {
  let stopped: Promise<void> | undefined;
  return {
    signal,
    get stopped() {
      stopped ??= signal.aborted
        ? Promise.resolve()
        : new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      return stopped;
    },
    sleep: async (ms) => {
      await sleep(ms, signal);
      return !signal.aborted;
    },
  };
}

/**
 * `fields` plus `signal`, `sleep` and `stopped` bound to `signal`: what every context handed to
 * a handler or daemon carries. `stopped` stays a lazy getter (spreading `stoppable()` would
 * read it, adding an abort listener per context).
 */
export function withStopHelpers<F extends object>(
  signal: AbortSignal,
  fields: F,
): F & { signal: AbortSignal; readonly stopped: Promise<void>; sleep(ms: number): Promise<boolean> } {
  const waits = stoppable(signal);
  return {
    ...fields,
    signal,
    get stopped() {
      return waits.stopped;
    },
    sleep: waits.sleep,
  };
}

/** Multiplies `ms` by a random factor in [1 - jitter, 1 + jitter]. */
export function jittered(ms: number, jitter: number, random: () => number = Math.random): number {
  return ms * (1 + jitter * (2 * random() - 1));
}

/**
 * Waits for `work`, or for `signal` if it aborts first (the work goes on; its result is
 * dropped). The abort listener is removed once either settles, so loops can call it freely.
 */
export function untilDoneOrAborted(work: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const aborted = () => resolve();
    signal.addEventListener('abort', aborted, { once: true });
    work.then(
      () => {
        signal.removeEventListener('abort', aborted);
        resolve();
      },
      (err: unknown) => {
        signal.removeEventListener('abort', aborted);
        reject(err);
      },
    );
  });
}

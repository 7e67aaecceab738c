/** A check `eventually` retries: a value passes; undefined, false or a throw means not yet. */
export type Check<T> = () => T | undefined | false | Promise<T | undefined | false>;

export interface EventuallyOptions {
  /** Default 30,000. */
  timeoutMs?: number;
  /** Between attempts; default 100. */
  intervalMs?: number;
}

/**
 * Polls `check` until it passes and resolves with its value. Past the deadline it rejects
 * with the last attempt's own error when it threw (an assertion keeps its diff), else with
 * one naming `what` and the last value.
 */
export async function eventually<T>(
  what: string,
  check: Check<T>,
  { timeoutMs = 30_000, intervalMs = 100 }: EventuallyOptions = {},
): Promise<T> {
  // A monotonic clock: a step of the wall clock (a VM's time sync) must not end the wait early.
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let failure: { err: unknown } | undefined;
    let last: unknown;
    try {
      last = await check();
      if (last !== undefined && last !== false) return last as T;
    } catch (err) {
      failure = { err };
    }
    if (performance.now() > deadline) {
      if (failure) throw failure.err;
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value ${JSON.stringify(last)}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

// Time as the engine sees it; injectable so scheduling can be tested without real waiting.
export interface Clock {
  /** Milliseconds, monotonic enough for scheduling (Date.now in production). */
  now(): number;
  /** Runs `fn` once after `delayMillis`; returns a function that cancels it. */
  setTimer(fn: () => void, delayMillis: number): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(fn, delayMillis) {
    const handle = setTimeout(fn, Math.max(0, delayMillis));
    return () => clearTimeout(handle);
  },
};

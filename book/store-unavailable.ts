// The one failure a shared lease store may raise that is not a bug: the store cannot be
// reached in time. The API answers it with 503 and Retry-After: store_unavailable when the
// call never reached the store (nothing changed), outcome_unknown when it was sent and no
// answer came (a timeout, a connection lost under it): the store may still apply it, and only
// a retry with the same request id (Idempotency-Key) learns the outcome without a second write.

export class StoreUnavailableError extends Error {
  constructor(
    message: string,
    /** When a retry is worth it, in seconds. */
    readonly retryAfterSeconds: number,
    options?: { cause?: unknown; mayHaveApplied?: boolean },
  ) {
    super(message, options);
    this.name = 'StoreUnavailableError';
    this.mayHaveApplied = options?.mayHaveApplied === true;
  }

  /** The call was sent and its answer never came: the store may apply it (or did). */
  readonly mayHaveApplied: boolean;
}

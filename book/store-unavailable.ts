// The one failure a shared lease store may raise that is not a bug: the store cannot be
// reached in time. The API answers it with 503 store_unavailable and Retry-After; the
// request may be retried as is (a lease that was not granted holds nothing).

export class StoreUnavailableError extends Error {
  constructor(
    message: string,
    /** When a retry is worth it, in seconds. */
    readonly retryAfterSeconds: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}

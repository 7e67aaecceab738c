/** Retry the same cause after `delaySeconds` (default 10 s); not counted as a failure. */
export class TemporaryError extends Error {
  constructor(
    message: string,
    readonly delaySeconds: number = 10,
  ) {
    super(message);
    this.name = 'TemporaryError';
  }
}

/** Do not retry until the object's generation changes; posted as a Warning Event. */
export class PermanentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentError';
  }
}

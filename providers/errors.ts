// The provider error taxonomy. The reconciler branches on these kinds, never on a cloud's
// own error shapes: each provider maps its errors here, in one place per provider.

export type ProviderOperation = 'create' | 'get' | 'delete' | 'listByTag';

export type ProviderErrorKind = 'NotFound' | 'QuotaExceeded' | 'Transient' | 'Permanent';

/** How long a caller waits before retrying after a QuotaExceededError: quota and stockouts heal slowly. */
export const QUOTA_RETRY_SECONDS = 300;

export interface ProviderErrorContext {
  /** The configured provider instance name, e.g. "gcp-eu". */
  provider: string;
  operation: ProviderOperation;
  providerID?: string;
  cause?: unknown;
}

export abstract class ProviderError extends Error {
  abstract readonly kind: ProviderErrorKind;
  readonly provider: string;
  readonly operation: ProviderOperation;
  readonly providerID?: string;

  constructor(message: string, ctx: ProviderErrorContext) {
    const subject = ctx.providerID ? `${ctx.operation} ${ctx.providerID}` : ctx.operation;
    super(
      `provider ${ctx.provider}: ${subject}: ${message}`,
      ctx.cause === undefined ? {} : { cause: ctx.cause },
    );
    this.provider = ctx.provider;
    this.operation = ctx.operation;
    this.providerID = ctx.providerID;
  }
}

/** The instance does not exist. Normal from get(); delete() never throws it. */
export class NotFoundError extends ProviderError {
  readonly kind = 'NotFound';
  override readonly name = 'NotFoundError';
}

/** Quota, rate-of-creation limits or a zone stockout: retry no sooner than QUOTA_RETRY_SECONDS. */
export class QuotaExceededError extends ProviderError {
  readonly kind = 'QuotaExceeded';
  override readonly name = 'QuotaExceededError';
}

/** Worth retrying with backoff: network trouble, 5xx, rate limiting. */
export class TransientError extends ProviderError {
  readonly kind = 'Transient';
  override readonly name = 'TransientError';
}

/**
 * Retrying cannot help (bad image, missing placement field, forbidden): the Proxy goes Failed.
 * Not named PermanentError so it never clashes with the framework's own.
 */
export class ProviderPermanentError extends ProviderError {
  readonly kind = 'Permanent';
  override readonly name = 'ProviderPermanentError';
}

export function isProviderError(err: unknown): err is ProviderError {
  return err instanceof ProviderError;
}
export function isNotFound(err: unknown): err is NotFoundError {
  return err instanceof NotFoundError;
}
export function isQuotaExceeded(err: unknown): err is QuotaExceededError {
  return err instanceof QuotaExceededError;
}
export function isTransient(err: unknown): err is TransientError {
  return err instanceof TransientError;
}
export function isPermanent(err: unknown): err is ProviderPermanentError {
  return err instanceof ProviderPermanentError;
}

const constructors = {
  NotFound: NotFoundError,
  QuotaExceeded: QuotaExceededError,
  Transient: TransientError,
  Permanent: ProviderPermanentError,
} as const;

/** Builds the error class for a kind: lets providers keep their error mapping as a table. */
export function providerError(
  kind: ProviderErrorKind,
  message: string,
  ctx: ProviderErrorContext,
): ProviderError {
  return new constructors[kind](message, ctx);
}

// The network failures every provider meets whatever its cloud: a refused or reset connection,
// a name that does not resolve, undici's socket errors. One list, so the providers (and the
// plugins, through the plugin API) agree on what "the network failed, retry" looks like.

/** Node's and undici's codes for a call that never got an answer: always worth a retry. */
export const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** How deep `cause` chains are followed: fetch wraps once, SDKs once or twice more. */
const MAX_CAUSE_DEPTH = 4;

/**
 * The network code of an error, or of one of its causes (`fetch` throws "fetch failed" with
 * the socket's error as its cause); undefined when it is not a network failure.
 */
export function networkErrorCode(err: unknown): string | undefined {
  let current: unknown = err;
  for (let depth = 0; depth <= MAX_CAUSE_DEPTH; depth++) {
    if (typeof current !== 'object' || current === null) return undefined;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The call failed on the network (no answer from the backend): classify it Transient. */
export function isNetworkError(err: unknown): boolean {
  return networkErrorCode(err) !== undefined;
}

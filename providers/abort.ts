/**
 * Runs a cloud call under the caller's AbortSignal: `call` gets the signal to pass on to its
 * SDK (so the request itself is cancelled where the SDK supports it), and the returned promise
 * rejects with `signal.reason` as soon as the signal aborts, whatever the SDK does meanwhile.
 * An aborted call always rejects with the caller's reason, never with an SDK's own abort error.
 */
export async function withSignal<T>(
  signal: AbortSignal | undefined,
  call: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (!signal) return call(undefined);
  signal.throwIfAborted();
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([call(signal), aborted]);
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** True when `err` is the reason `signal` was aborted with: the caller cancelled, nothing failed. */
export function isAbortOf(err: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && err === signal.reason;
}

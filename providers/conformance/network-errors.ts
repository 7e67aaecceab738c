import { NETWORK_ERROR_CODES } from '../network-errors.js';

/** One network failure in a shape some client library throws it in. */
export interface NetworkErrorSample {
  /** What the sample is, for a table test's title. */
  label: string;
  error: Error;
}

/**
 * Every network code in the shapes providers meet: Node's own (`err.code`), fetch's
 * "fetch failed" wrapping the socket error as its cause, and a client library wrapping that
 * once more. A provider's error mapping should call each one Transient:
 *
 * ```ts
 * it.each(networkErrorSamples())('$label is Transient', ({ error }) => {
 *   expect(classifyMyCloudError(error)).toBe('Transient');
 * });
 * ```
 */
export function networkErrorSamples(): NetworkErrorSample[] {
  return [...NETWORK_ERROR_CODES].flatMap((code) => {
    const socket = Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code });
    const fetchFailed = new TypeError('fetch failed', { cause: socket });
    return [
      { label: `${code} (Node)`, error: socket },
      { label: `${code} (fetch: the cause of "fetch failed")`, error: fetchFailed },
      { label: `${code} (wrapped twice)`, error: new Error('request failed', { cause: fetchFailed }) },
    ];
  });
}

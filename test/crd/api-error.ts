import { ApiException } from '@kubernetes/client-node';

/** The API server's own message (metav1.Status.message) from a failed client-node call. */
export function apiErrorMessage(err: unknown): string {
  if (!(err instanceof ApiException)) throw err;
  const body: unknown = typeof err.body === 'string' ? safeParse(err.body) : err.body;
  if (body && typeof body === 'object' && 'message' in body && typeof body.message === 'string')
    return body.message;
  return `HTTP ${err.code}: ${String(err.body)}`;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Resolves to the rejection message of a call expected to fail; fails the test if it succeeds. */
export async function rejectionOf(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    return apiErrorMessage(err);
  }
  throw new Error('the API server accepted a request it should have rejected');
}

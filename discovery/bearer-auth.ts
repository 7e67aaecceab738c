// Static bearer-token authentication for the discovery API.
import { hash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { sendError } from './api-error.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** Recently presented tokens whose digests are kept: clients resend the same token. */
const DIGEST_CACHE_ENTRIES = 16;

/** Rejects requests whose `Authorization: Bearer <token>` is missing or differs from `token`. */
export function bearerAuth(token: string): RequestHandler {
  // Comparing fixed-length digests keeps the comparison constant-time even when the
  // lengths differ (timingSafeEqual itself throws on unequal lengths).
  const expected = digest(token);
  // Hashing is most of this middleware's cost; the cache is keyed by what the client sent
  // (a lookup never compares against the secret), so it reveals nothing about the token.
  const digests = new Map<string, Buffer>();
  const digestOf = (presented: string) => {
    let d = digests.get(presented);
    if (d === undefined) {
      d = digest(presented);
      if (digests.size >= DIGEST_CACHE_ENTRIES) digests.delete(digests.keys().next().value!);
      digests.set(presented, d);
    }
    return d;
  };
  return (req, res, next) => {
    const match = BEARER.exec(req.headers.authorization ?? '');
    if (match !== null && timingSafeEqual(digestOf(match[1]), expected)) return next();
    res.setHeader('WWW-Authenticate', 'Bearer realm="proxy-operator discovery"');
    const message =
      req.headers.authorization === undefined
        ? 'missing Authorization header; expected "Authorization: Bearer <token>"'
        : 'invalid bearer token';
    sendError(res, 401, 'unauthorized', message);
  };
}

function digest(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

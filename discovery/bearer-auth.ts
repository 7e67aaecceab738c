// Bearer-token authentication for the discovery API against a set of named tokens.
import type { RequestHandler, Response } from 'express';
import { sendError, sendTooManyRequests } from './api-error.js';
import { tokenDigest, type ApiTokens } from '../book/api-tokens.js';
import type { SourceLimiter } from './source-limiter.js';

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/** Recently presented tokens whose digests are kept: clients resend the same token. */
const DIGEST_CACHE_ENTRIES = 64;

/** The token name an authenticated request came with (set by bearerAuth). */
export function ownerOf(res: Response): string | undefined {
  return (res.locals as { owner?: string }).owner;
}

/**
 * Rejects requests whose `Authorization: Bearer <token>` is missing or names no token of
 * `tokens` (read on every request, so a reload applies at once); otherwise records the
 * token's name as the request's owner. An address that failed too often (`sources`) is
 * answered 429 before its token is hashed.
 */
export function bearerAuth(tokens: ApiTokens, sources?: SourceLimiter): RequestHandler {
  // Hashing is most of this middleware's cost; the cache is keyed by what the client sent
  // (a lookup never compares against a secret), so it reveals nothing about the tokens.
  const digests = new Map<string, string>();
  const digestOf = (presented: string) => {
    let d = digests.get(presented);
    if (d === undefined) {
      d = tokenDigest(presented);
      if (digests.size >= DIGEST_CACHE_ENTRIES) digests.delete(digests.keys().next().value!);
      digests.set(presented, d);
    }
    return d;
  };
  return (req, res, next) => {
    const match = BEARER.exec(req.headers.authorization ?? '');
    const presented = match?.[1];
    // A token presented before is known without hashing; a valid client resends its own,
    // so an address's failures never lock out the valid clients behind it.
    const cached = presented === undefined ? undefined : digests.get(presented);
    let name = cached === undefined ? undefined : tokens.nameOf(cached);
    const address = req.socket.remoteAddress ?? '';
    if (name === undefined) {
      const waitMs = sources?.blocked(address);
      if (waitMs !== undefined) {
        sendTooManyRequests(
          res,
          waitMs,
          (seconds) => `too many requests without a valid token from this address; retry after ${seconds} s`,
        );
        return;
      }
      if (presented !== undefined) name = tokens.nameOf(digestOf(presented));
    }
    if (name !== undefined) {
      (res.locals as { owner?: string }).owner = name;
      return next();
    }
    sources?.failed(address);
    res.setHeader('WWW-Authenticate', 'Bearer realm="proxy-operator discovery"');
    // Never echo what was sent: a mistyped token is still most of a token.
    const message =
      req.headers.authorization === undefined
        ? 'missing Authorization header; expected "Authorization: Bearer <token>"'
        : match === null
          ? 'malformed Authorization header; expected "Authorization: Bearer <token>"'
          : 'invalid bearer token';
    sendError(res, 401, 'unauthorized', message);
  };
}

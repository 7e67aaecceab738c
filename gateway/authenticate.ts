// Who is asking and with which options: the Proxy-Authorization header checked against the
// tokens, and its username parsed. A pure decision over the verifier's and book's answers.
import type { GatewayBook, TokenVerifier } from './ports.js';
import { parseProxyAuthorization } from './proxy-authorization.js';
import type { GatewayError } from './replies.js';
import { parseUsername, type UsernameOptions } from './username.js';

export type Authentication =
  { ok: true; owner: string; options: UsernameOptions } | { ok: false; error: GatewayError };

export function authenticate(
  header: string | undefined,
  tokens: TokenVerifier,
  book: Pick<GatewayBook, 'attributeKeys'>,
  maxTTLSeconds: number,
  /** The client's address: failed tokens are limited per address (TokenVerifier.throttled). */
  source = '',
): Authentication {
  const refuse = (code: GatewayError['code'], message: string): Authentication => ({
    ok: false,
    error: { status: 407, code, message },
  });
  if (!tokens.configured())
    return refuse(
      'no_tokens_configured',
      'the gateway has no discovery API token configured, so it serves nobody (it is never an open proxy)',
    );
  const credentials = parseProxyAuthorization(header);
  if (!credentials.ok)
    return refuse(
      header === undefined || header === '' ? 'proxy_auth_required' : 'malformed_credentials',
      credentials.message,
    );
  const owner = checkToken(tokens, credentials.token, source);
  if (typeof owner !== 'string') return { ok: false, error: owner };
  const parsed = parseUsername(credentials.username, {
    attributeKeys: book.attributeKeys(owner),
    maxTTLSeconds,
  });
  if (!parsed.ok) return refuse('invalid_username', parsed.message);
  return { ok: true, owner, options: parsed.options };
}

/**
 * The name of a presented token, or the refusal: 429 for a source that guessed too often
 * (before the token is hashed), 407 for a token that names nobody (counted against the source).
 */
export function checkToken(tokens: TokenVerifier, token: string, source: string): string | GatewayError {
  const waitMs = tokens.throttled?.(token, source);
  if (waitMs !== undefined) {
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    return {
      status: 429,
      code: 'too_many_requests',
      message: `too many wrong tokens from this address; retry after ${seconds} s`,
      retryAfter: seconds,
    };
  }
  const owner = tokens.nameOf(token);
  if (owner !== undefined) return owner;
  tokens.failed?.(source);
  // Never echo what was sent: a mistyped token is still most of a token.
  return { status: 407, code: 'invalid_token', message: 'the password is not a discovery API token' };
}

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
  const owner = tokens.nameOf(credentials.token);
  // Never echo what was sent: a mistyped token is still most of a token.
  if (owner === undefined) return refuse('invalid_token', 'the password is not a discovery API token');
  const parsed = parseUsername(credentials.username, {
    attributeKeys: book.attributeKeys(owner),
    maxTTLSeconds,
  });
  if (!parsed.ok) return refuse('invalid_username', parsed.message);
  return { ok: true, owner, options: parsed.options };
}

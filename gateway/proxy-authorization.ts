// The `Proxy-Authorization: Basic` header taken apart: the username carries the options
// (username.ts), the password is a discovery API token. Pure; never echoes the token.

export type Credentials = { ok: true; username: string; token: string } | { ok: false; message: string };

const BASIC = /^Basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i;

export function parseProxyAuthorization(header: string | undefined): Credentials {
  if (header === undefined || header === '')
    return {
      ok: false,
      message:
        'missing Proxy-Authorization header; send Basic credentials: the username holds the options (session-<id>, ...), the password is a discovery API token',
    };
  const m = BASIC.exec(header);
  if (m === null)
    return {
      ok: false,
      message: 'malformed Proxy-Authorization header; expected "Basic <base64 of username:token>"',
    };
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0)
    return { ok: false, message: 'malformed Proxy-Authorization header: no ":" between username and token' };
  const token = decoded.slice(colon + 1);
  if (token === '')
    return {
      ok: false,
      message: 'empty password in Proxy-Authorization; the password is a discovery API token',
    };
  return { ok: true, username: decoded.slice(0, colon), token };
}

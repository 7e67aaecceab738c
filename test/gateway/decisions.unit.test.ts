// The gateway's pure decisions: credentials, targets, what an upstream's answer means, the
// report body. Each table reads as the rule in docs/gateway.md.
import { parseProxyAuthorization } from '../../gateway/proxy-authorization.js';
import { canonicalTarget, connectAuthority } from '../../gateway/target.js';
import {
  connectVerdict,
  mayResend,
  responseVerdict,
  retryAfterSeconds,
  type FailurePoint,
} from '../../gateway/upstream-outcome.js';
import { parseReportBody, sessionOfReportPath } from '../../gateway/session-report.js';
import { clientErrorReply } from '../../gateway/replies.js';
import { authenticate } from '../../gateway/authenticate.js';
import { targetName } from '../../book/target-name.js';

const basic = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;

describe('Proxy-Authorization', () => {
  it.each<[string, string | undefined, object]>([
    ['username and token', basic('session-a:tok'), { ok: true, username: 'session-a', token: 'tok' }],
    ['an empty username', basic(':tok'), { ok: true, username: '', token: 'tok' }],
    ["a ':' inside the token", basic('u:a:b'), { ok: true, username: 'u', token: 'a:b' }],
    [
      'the scheme in lower case',
      `basic ${Buffer.from('u:t').toString('base64')}`,
      { ok: true, username: 'u', token: 't' },
    ],
  ])('reads %s', (_n, header, want) => {
    expect(parseProxyAuthorization(header)).toEqual(want);
  });

  it.each<[string, string | undefined, RegExp]>([
    ['no header', undefined, /missing Proxy-Authorization header/],
    ['a Bearer token', 'Bearer abc', /malformed Proxy-Authorization header; expected "Basic/],
    ['no colon', basic('justatoken'), /no ":" between username and token/],
    ['an empty token', basic('session-a:'), /empty password/],
    ['not base64', 'Basic !!!', /malformed/],
  ])('refuses %s', (_n, header, message) => {
    const parsed = parseProxyAuthorization(header);
    expect(parsed).toMatchObject({ ok: false, message: expect.stringMatching(message) });
  });
});

describe('authenticate', () => {
  const tokens = {
    configured: () => true,
    nameOf: (t: string) => (t === 'good-token-123456' ? 'team-a' : undefined),
    names: () => new Set(['team-a']),
  };
  const book = { attributeKeys: () => new Set(['geo']) };
  it.each<[string, string | undefined, object]>([
    [
      'a good token and options',
      basic('session-s-geo-eu:good-token-123456'),
      { ok: true, owner: 'team-a', options: { session: 's', selector: { geo: 'eu' } } },
    ],
    ['no header', undefined, { ok: false, error: { status: 407, code: 'proxy_auth_required' } }],
    ['a malformed header', 'Digest x', { ok: false, error: { status: 407, code: 'malformed_credentials' } }],
    [
      'a bad token',
      basic('session-s:wrong-token-123456'),
      {
        ok: false,
        error: { status: 407, code: 'invalid_token', message: 'the password is not a discovery API token' },
      },
    ],
    [
      'a bad username',
      basic('sesion-s:good-token-123456'),
      { ok: false, error: { status: 407, code: 'invalid_username' } },
    ],
  ])('%s', (_n, header, want) => {
    expect(authenticate(header, tokens, book, 3600)).toMatchObject(want);
  });

  it('refuses everyone when no token is configured: never an open proxy', () => {
    const none = { configured: () => false, nameOf: () => undefined, names: () => new Set<string>() };
    expect(authenticate(basic(':anything'), none, book, 3600)).toMatchObject({
      ok: false,
      error: { status: 407, code: 'no_tokens_configured' },
    });
  });

  it('never echoes the token', () => {
    const r = authenticate(basic('x:wrong-token-123456'), tokens, book, 3600);
    expect(JSON.stringify(r)).not.toContain('wrong-token');
  });
});

describe('targets, canonicalized as the discovery API keys them', () => {
  it.each<[string, string | undefined]>([
    ['Example.COM', 'example.com'],
    ['example.com.', 'example.com'],
    ['[::1]', '::1'],
    ['127.0.0.1', '127.0.0.1'],
    ['', undefined],
    ['a b', undefined],
    // Not host names: a cooldown keyed on them would protect nothing.
    ['https://shop.example/', undefined],
    ['shop.example:443', undefined],
    ['shop!.example', undefined],
  ])('%j → %j', (host, want) => {
    expect(canonicalTarget(host)).toBe(want);
  });

  it.each(['Shop.Example', 'shop.example.', '[2001:db8::1]', '10.0.0.1', 'a_b.example', 'https://x.example'])(
    '%j: the gateway keys it as the book does (book/target-name.ts)',
    (host) => {
      const book = targetName(host);
      expect(canonicalTarget(host)).toBe(book.ok ? book.target : undefined);
    },
  );

  it.each<[string, object | undefined]>([
    ['example.com:443', { host: 'example.com', port: 443 }],
    ['[::1]:8443', { host: '[::1]', port: 8443 }],
    ['example.com', undefined],
    ['example.com:0', undefined],
    ['example.com:70000', undefined],
    ['user@example.com:443', undefined],
  ])('CONNECT %j → %j', (authority, want) => {
    expect(connectAuthority(authority)).toEqual(want);
  });
});

describe("an upstream's answer to CONNECT", () => {
  it.each<[number, string]>([
    [200, 'tunnel'],
    [204, 'tunnel'],
    [502, 'site_down'], // the site is down: the target's failure, not the proxy's
    [403, 'retry'], // the upstream's own refusal (a denied destination)
    [407, 'retry'], // our credentials for it are wrong
    [503, 'retry'],
    [504, 'retry'],
  ])('%d → %s', (status, kind) => {
    expect(connectVerdict(status).kind).toBe(kind);
  });
});

describe("a site's answer on plain HTTP", () => {
  const codes = { banned: new Set([403]), rateLimited: new Set([429, 503]) };
  const now = Date.UTC(2026, 0, 1);
  it.each<[number, string | undefined, object]>([
    [200, undefined, { kind: 'pass' }],
    [404, undefined, { kind: 'pass' }],
    [502, undefined, { kind: 'pass' }],
    [403, undefined, { kind: 'report', report: 'banned' }],
    [429, undefined, { kind: 'report', report: 'rate_limited' }],
    [429, '30', { kind: 'report', report: 'rate_limited', retryAfterSeconds: 30 }],
    [503, 'Thu, 01 Jan 2026 00:01:00 GMT', { kind: 'report', report: 'rate_limited', retryAfterSeconds: 60 }],
    [407, undefined, { kind: 'retry', report: 'unreachable' }],
  ])('%d (Retry-After %j) → %j', (status, retryAfter, want) => {
    expect(responseVerdict(status, retryAfter, codes, now)).toEqual(want);
  });

  it.each<[string | undefined, number | undefined]>([
    [undefined, undefined],
    ['0', 0],
    [' 120 ', 120],
    ['Wed, 31 Dec 2025 23:00:00 GMT', 0],
    ['soon', undefined],
  ])('Retry-After %j → %j seconds', (value, want) => {
    expect(retryAfterSeconds(value, now)).toBe(want);
  });
});

describe('the report by session', () => {
  it.each<[string, string | undefined]>([
    ['/v1/sessions/abc/report', 'abc'],
    ['/v1/sessions/a%3Ab/report', 'a:b'],
    ['/v1/sessions//report', undefined],
    ['/v1/sessions/abc', undefined],
  ])('path %j → session %j', (path, want) => {
    expect(sessionOfReportPath(path)).toBe(want);
  });

  it.each<[string, object | string]>([
    ['{"target":"Example.com","result":"banned"}', { target: 'example.com', result: 'banned' }],
    [
      '{"target":"a.io","result":"rate_limited","retryAfterSeconds":30}',
      { target: 'a.io', result: 'rate_limited', retryAfterSeconds: 30 },
    ],
    ['{"target":"a.io","result":"ok"}', 'result must be one of banned, rate_limited, unreachable'],
    ['{"result":"banned"}', 'target must be the host name the tunnel was opened to'],
    [
      '{"target":"https://shop.example/","result":"banned"}',
      "target must be a host name, not a URL: send 'shop.example', not 'https://shop.example/'",
    ],
    [
      '{"target":"shop.example:443","result":"banned"}',
      "target must be a host name, without a port: send 'shop.example'",
    ],
    [
      '{"target":"a.io","result":"banned","why":1}',
      'unknown field "why" (expected target, result, retryAfterSeconds)',
    ],
    [
      '{"target":"a.io","result":"banned","retryAfterSeconds":-1}',
      'retryAfterSeconds must be a whole number of seconds',
    ],
    [
      'nope',
      'the body must be JSON: {"target": "<host>", "result": "banned" | "rate_limited" | "unreachable"}',
    ],
    ['[]', 'the body must be a JSON object'],
  ])('%s → %j', (text, want) => {
    expect(parseReportBody(text)).toEqual(want);
  });
});

describe('sending a failed request again through another upstream (RFC 9110 9.2.2)', () => {
  it.each<[string, FailurePoint, boolean]>([
    ['GET', 'before_sending', true],
    ['GET', 'after_sending', true],
    ['HEAD', 'after_sending', true],
    ['OPTIONS', 'after_sending', true],
    ['TRACE', 'after_sending', true],
    ['PUT', 'after_sending', true],
    ['DELETE', 'after_sending', true],
    ['POST', 'before_sending', true],
    ['POST', 'after_sending', false],
    ['PATCH', 'before_sending', true],
    ['PATCH', 'after_sending', false],
    ['PROPFIND', 'after_sending', false],
    // Methods are case-sensitive: only the registered spelling is known to be idempotent.
    ['get', 'after_sending', false],
  ])('%s failed %s: sent again %s', (method, point, want) => {
    expect(mayResend(method, point)).toBe(want);
  });
});

describe("a request Node's parser refused (clientError)", () => {
  it.each<[string | undefined, number, string, RegExp]>([
    ['HPE_HEADER_OVERFLOW', 431, 'headers_too_large', /larger than Node's limit/],
    ['ERR_HTTP_REQUEST_TIMEOUT', 408, 'request_timeout', /no whole request head within 30 s/],
    ['HPE_INVALID_METHOD', 400, 'invalid_request', /\(HPE_INVALID_METHOD\)/],
    [undefined, 400, 'invalid_request', /\(parse error\)/],
  ])('%s: %d %s', (code, status, error, message) => {
    expect(clientErrorReply(code, 30_000)).toEqual({
      status,
      code: error,
      message: expect.stringMatching(message),
    });
  });
});

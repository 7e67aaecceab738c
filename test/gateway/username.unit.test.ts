// The proxy username's grammar (docs/gateway.md, "The username"), one row per rule.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseUsername, type UsernameOptions } from '../../gateway/username.js';

const limits = { attributeKeys: new Set(['geo', 'provider', 'cloud-region']), maxTTLSeconds: 3600 };

describe('parseUsername', () => {
  it.each<[string, string, UsernameOptions]>([
    ['an empty username: no options', '', { selector: {} }],
    ['a session', 'session-abc123', { session: 'abc123', selector: {} }],
    ['a session and an attribute', 'session-abc123-geo-eu', { session: 'abc123', selector: { geo: 'eu' } }],
    ['options in any order', 'geo-eu-session-s1', { session: 's1', selector: { geo: 'eu' } }],
    ['two attributes', 'geo-eu-provider-gcp', { selector: { geo: 'eu', provider: 'gcp' } }],
    ['a TTL in seconds', 'ttl-90', { ttlSeconds: 90, selector: {} }],
    ['a TTL with a unit', 'ttl-5m', { ttlSeconds: 300, selector: {} }],
    ['a TTL in hours', 'ttl-1h', { ttlSeconds: 3600, selector: {} }],
    ["'-' in a value, written '--'", 'session-crawl--7', { session: 'crawl-7', selector: {} }],
    [
      "'-' in a key and a value, written '--'",
      'cloud--region-eu--west1',
      { selector: { 'cloud-region': 'eu-west1' } },
    ],
    [
      "'--' then a separator: the value ends in '-'",
      'session-a---geo-eu',
      { session: 'a-', selector: { geo: 'eu' } },
    ],
    ["'--' twice: two '-'", 'session-a----b', { session: 'a--b', selector: {} }],
    ["'-' in a value, as %2D", 'session-crawl%2D7', { session: 'crawl-7', selector: {} }],
    ["'-' in a key, as %2D", 'cloud%2Dregion-eu%2Dwest1', { selector: { 'cloud-region': 'eu-west1' } }],
    ["Crawlee's session ids", 'session-session_Ab3xY', { session: 'session_Ab3xY', selector: {} }],
    ["':' and '@' escaped in a session", 'session-a%3Ab%40c', { session: 'a:b@c', selector: {} }],
    ['letters in upper case kept', 'session-ABC', { session: 'ABC', selector: {} }],
  ])('%s: %j', (_name, username, options) => {
    expect(parseUsername(username, limits)).toEqual({ ok: true, options });
  });

  it.each<[string, string, RegExp]>([
    [
      'an unknown option',
      'sesion-abc',
      /unknown option "sesion" \(known: session, ttl, cloud-region, geo, provider\)/,
    ],
    ['an option without a value', 'session', /option "session" has no value/],
    ['an odd number of parts', 'session-a-geo', /option "geo" has no value/],
    ['an empty value', 'session-', /the value of "session" must be/],
    ['a missing session value reads as one unknown key', 'session--geo-eu', /unknown option "session-geo"/],
    ['a repeated option', 'geo-eu-geo-us', /option "geo" is given twice/],
    ['a character outside the grammar', 'session-a b', /the value of "session" must be letters, digits/],
    ['a bad escape', 'session-a%zz', /the value of "session" must be/],
    ['an escape that is not UTF-8', 'session-%ff', /the value of "session" must be/],
    ['a session the book cannot key', 'session-a%2Fb', /session must be 1 to 128 characters/],
    ['a session too long', `session-${'a'.repeat(129)}`, /session must be 1 to 128/],
    ['a TTL of 0', 'ttl-0', /ttl must be 1 to 3600 seconds/],
    ['a TTL over the limit', 'ttl-2h', /ttl must be 1 to 3600 seconds/],
    ['a TTL that is not a number', 'ttl-soon', /ttl must be 1 to 3600 seconds.*got "soon"/],
    ['an empty key', '-eu', /option name "" must be/],
    ['a username too long', `geo-${'a'.repeat(1100)}`, /username is longer than 1024/],
  ])('refuses %s: %j', (_name, username, message) => {
    const parsed = parseUsername(username, limits);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.message).toMatch(/^proxy username: /);
      expect(parsed.message).toMatch(message);
    }
  });
});

describe('docs/gateway.md', () => {
  // Every example in the username table must parse: the page is the grammar's specification.
  const page = readFileSync(fileURLToPath(new URL('../../docs/gateway.md', import.meta.url)), 'utf8');
  const table = page.slice(page.indexOf('| username | means |'), page.indexOf('## Errors'));
  const examples = [...table.matchAll(/^\| `([^`]+)` \|/gm)].map((m) => m[1]);

  it('shows examples', () => {
    expect(examples.length).toBeGreaterThanOrEqual(6);
  });

  it.each(examples)('%s parses', (username) => {
    expect(parseUsername(username, limits).ok).toBe(true);
  });
});

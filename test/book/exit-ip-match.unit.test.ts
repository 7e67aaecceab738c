import { blockKeys, exitIPMatches, exitKey, parseExitIPTerm } from '../../book/exit-ip-match.js';
import { proxyMatcher } from '../../book/selector.js';
import { parseLeaseBody } from '../../discovery/request-parsing.js';
import { ApiError } from '../../discovery/api-error.js';

describe('the exit IP term of a lease request', () => {
  it.each([
    ['an IPv4 address', '203.0.113.7', '203.0.113.7'],
    ['an IPv4 block', '203.0.113.0/24', '203.0.113.0/24'],
    ['everything IPv4', '0.0.0.0/0', '0.0.0.0/0'],
    ['a /32', '203.0.113.7/32', '203.0.113.7'],
    ['an IPv6 address, canonicalized', '2001:DB8:0::1', '2001:db8::1'],
    ['an IPv6 block', '2001:db8::/32', '2001:db8::/32'],
    ['an IPv4-mapped address as its IPv4', '::ffff:127.0.0.3', '127.0.0.3'],
  ])('takes %s', (_what, text, canonical) => {
    expect(parseExitIPTerm(text)?.text).toBe(canonical);
  });

  it.each([
    ['host bits set', '203.0.113.7/24'],
    ['a prefix too long (IPv4)', '203.0.113.0/33'],
    ['a prefix too long (IPv6)', '2001:db8::/129'],
    ['a prefix with a leading zero', '203.0.113.0/024'],
    ['an empty prefix', '203.0.113.0/'],
    ['a negative prefix', '203.0.113.0/-1'],
    ['a host name', 'proxy.example.com'],
    ['leading zeros in IPv4', '203.000.113.7'],
    ['an IPv6 zone', 'fe80::1%eth0'],
    ['two slashes', '10.0.0.0/8/8'],
    ['empty', ''],
  ])('refuses %s', (_what, text) => {
    expect(parseExitIPTerm(text)).toBeUndefined();
  });

  it.each([
    ['203.0.113.0/24', '203.0.113.7', true],
    ['203.0.113.0/24', '203.0.114.7', false],
    ['203.0.113.7', '203.0.113.7', true],
    ['203.0.113.7', '203.0.113.8', false],
    ['0.0.0.0/0', '8.8.8.8', true],
    ['127.0.0.2/31', '127.0.0.3', true],
    ['127.0.0.2/31', '127.0.0.4', false],
    ['2001:db8::/32', '2001:db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['::/0', '2001:db8::1', true],
    // Families never cross: an IPv4 exit IP is in no IPv6 block, even ::/0.
    ['::/0', '8.8.8.8', false],
    ['0.0.0.0/0', '2001:db8::1', false],
    // Exit IPs are recorded canonical, but a mapped one still counts as its IPv4.
    ['127.0.0.0/8', '::ffff:127.0.0.3', true],
    ['203.0.113.0/24', undefined, false],
  ])('%s contains %s: %s', (term, exitIP, expected) => {
    expect(exitIPMatches(parseExitIPTerm(term)!, exitIP)).toBe(expected);
    // The books' counts (issue 47 item 4): an address is in a block when its key lies between
    // the block's first and last keys, as string order goes.
    const { first, last } = blockKeys(parseExitIPTerm(term)!);
    const key = exitKey(exitIP);
    expect(key !== '' && first <= key && key <= last).toBe(expected);
  });

  it.each([
    ['203.0.113.7', '4cb007107'],
    ['0.0.0.0', '400000000'],
    ['255.255.255.255', '4ffffffff'],
    ['2001:db8::1', '620010db8000000000000000000000001'],
    ['::ffff:127.0.0.3', '47f000003'],
    ['not an address', ''],
    [undefined, ''],
  ])('the key of %s is %j: family, then fixed-width hex', (exitIP, key) => {
    expect(exitKey(exitIP)).toBe(key);
  });

  it.each([
    ['203.0.113.0/24', '4cb007100', '4cb0071ff'],
    ['203.0.113.7', '4cb007107', '4cb007107'],
    ['0.0.0.0/0', '400000000', '4ffffffff'],
    ['2001:db8::/32', '620010db8000000000000000000000000', '620010db8ffffffffffffffffffffffff'],
  ])('the block %s spans the keys %s to %s', (term, first, last) => {
    expect(blockKeys(parseExitIPTerm(term)!)).toEqual({ first, last });
  });

  it('combines with the attribute selector: both must hold', () => {
    const match = proxyMatcher({ geo: 'eu' }, parseExitIPTerm('10.0.0.0/8'));
    expect(match({ attributes: { geo: 'eu' }, exitIP: '10.1.2.3' })).toBe(true);
    expect(match({ attributes: { geo: 'us' }, exitIP: '10.1.2.3' })).toBe(false);
    expect(match({ attributes: { geo: 'eu' }, exitIP: '11.1.2.3' })).toBe(false);
    expect(match({ attributes: { geo: 'eu' } })).toBe(false);
    expect(proxyMatcher({ geo: 'eu' })({ attributes: { geo: 'eu' } })).toBe(true);
  });

  it('a lease body takes exitIP, and refuses a bad one with a 400 naming the field', () => {
    const limits = { defaultTTLSeconds: 300, maxTTLSeconds: 3600 };
    expect(parseLeaseBody({ exitIP: '10.0.0.0/8' }, limits).exitIP?.text).toBe('10.0.0.0/8');
    expect(parseLeaseBody({}, limits)).not.toHaveProperty('exitIP');
    for (const bad of ['10.0.0.1/8', 42, null, 'x'.repeat(100), ['10.0.0.1']]) {
      let caught: unknown;
      try {
        parseLeaseBody({ exitIP: bad }, limits);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ApiError);
      expect(caught).toMatchObject({ status: 400, message: expect.stringMatching(/^exitIP must be/) });
    }
  });
});

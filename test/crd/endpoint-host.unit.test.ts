import {
  isIP,
  isProxyHost,
  probeURLHostIsLiteral,
  URL_ANGLE_BRACKET,
  URL_GOOD_PORT,
  URL_HAS_PORT,
  URL_IPV4_HOST,
  URL_NUMERIC_HOST,
  URL_ZONE,
} from '../../crds/endpoint-host.js';
import { BAD_HOSTS, GOOD_HOSTS } from './host-cases.js';

describe('a proxy host names exactly one address (issue 12 item 1)', () => {
  it.each(GOOD_HOSTS)('accepts %s: %s', (_what, host) => {
    expect(isProxyHost(host)).toBe(true);
  });

  it.each(BAD_HOSTS)('rejects %s: %s', (_what, host) => {
    expect(isProxyHost(host)).toBe(false);
  });

  it.each([
    ['10.0.0.8', true],
    ['10.0.0.08', false],
    ['::ffff:10.0.0.8', false],
    ['fe80::1%eth0', false],
    ['1::', true],
    ['1:2:3:4:5:6:7::', true],
    ['::2:3:4:5:6:7:8', true],
    ['1:2:3:4:5:6:7:8', true],
    ['1:2:3:4:5:6:7', false],
    ['1:2:3:4:5:6::7:8', false],
    ['1:2:3:4:5:6:7::8', false],
    [':1::', false],
    ['1.2.3.4::', false],
  ])('isIP(%s) is %s, as in Kubernetes CEL', (s, expected) => {
    expect(isIP(s)).toBe(expected);
  });
});

describe('the probe URL patterns the CRD applies to spec.healthCheck.probeURL (issue 12 item 2)', () => {
  /** RE2's leading (?i) as a JavaScript flag; the rest of the syntax is common to both. */
  const re = (pattern: string) =>
    pattern.startsWith('(?i)') ? new RegExp(pattern.slice(4), 'i') : new RegExp(pattern);
  const portOK = (url: string) => !re(URL_HAS_PORT).test(url) || re(URL_GOOD_PORT).test(url);
  const zoneOK = (url: string) => !re(URL_ZONE).test(url) && !re(URL_ANGLE_BRACKET).test(url);
  const hostOK = (url: string) => !re(URL_NUMERIC_HOST).test(url) || re(URL_IPV4_HOST).test(url);

  it.each([
    ['https://www.gstatic.com/generate_204', true, true, true],
    ['http://10.0.0.1:65535/healthz', true, true, true],
    ['http://[2001:db8::1]:1/', true, true, true],
    ['http://[::1]/', true, true, true],
    ['http://user:123@example.com/', true, true, true],
    ['http://user:1@example.com:8080/?q=%25', true, true, true],
    ['http://a.7f/', true, true, true],
    ['http://example.com:/', true, true, true],
    ['http://example.com:65536/', false, true, true],
    ['http://example.com:0/', false, true, true],
    ['http://example.com:080/', false, true, true],
    ['http://example.com:99999999999999999999', false, true, true],
    ['http://[fe80::1%25eth0]:8080/', true, false, true],
    ['http://a<b/', true, false, true],
    ['http://a>b:8080/', true, false, true],
    ['http://example.com/?q=<x>', true, true, true],
    ['http://0177.0.0.1/', true, true, false],
    ['https://0X7F.1/', true, true, false],
    ['http://2130706433:8080/', true, true, false],
    ['http://u:p@127.1/', true, true, false],
    ['http://127.0.0.1./', true, true, false],
    ['http://256.0.0.1/', true, true, false],
  ])('%s: port %s, zone/brackets %s, host %s', (url, port, zone, host) => {
    expect([portOK(url), zoneOK(url), hostOK(url)]).toEqual([port, zone, host]);
    expect(probeURLHostIsLiteral(url)).toBe(host);
  });
});

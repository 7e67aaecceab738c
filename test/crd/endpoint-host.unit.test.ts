import { isIP, isProxyHost } from '../../crds/endpoint-host.js';
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

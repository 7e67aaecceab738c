import { probeTargetProblem } from '../../handlers/probe-target-problem.js';
import type { ProbeTarget } from '../../health/index.js';

const target = (over: Partial<ProbeTarget>): ProbeTarget => ({
  key: 'ns/p',
  host: '127.0.0.9',
  port: 3128,
  probeURL: 'http://127.0.0.1:8080/healthz',
  intervalSeconds: 10,
  timeoutSeconds: 2,
  failureThreshold: 1,
  successThreshold: 1,
  expectedStatusCodes: [200],
  ...over,
});

describe('a probe target the prober cannot use is recognised before probing', () => {
  it.each([
    ['an IPv4 proxy', {}, undefined],
    ['an IPv6 proxy', { host: '::1' }, undefined],
    ['a DNS-named proxy', { host: 'proxy.example.com' }, undefined],
    ['an IPv6 zone id', { host: 'fe80::1%eth0' }, /not a usable URL host and port/],
    ['a host with a space', { host: 'a b' }, /not a usable URL host and port/],
    // Issue 12 item 1: a URL parser would probe another address than the one handed out.
    [
      'a zero-padded IPv4 host',
      { host: '127.0.0.010' },
      /the proxy host "127\.0\.0\.010" is not an IPv4 address in dotted decimal/,
    ],
    ['an octal IPv4 host', { host: '0177.0.0.1' }, /the proxy host "0177\.0\.0\.1" is not/],
    ['a bare integer host', { host: '2130706433' }, /is not an IPv4 address/],
    ['a short-form host', { host: '127.1' }, /is not an IPv4 address/],
    ['an IPv4-mapped IPv6 host', { host: '::ffff:127.0.0.1' }, /is not an IPv4 address/],
    [
      'a probe URL at an octal host',
      { probeURL: 'http://0177.0.0.1/' },
      /has a numeric host a URL parser reads as another IPv4 address/,
    ],
    ['a probe URL at a short-form host', { probeURL: 'https://127.1:8443/x' }, /has a numeric host/],
    ['a probe URL at a canonical IPv4 host', { probeURL: 'http://10.0.0.1:8080/' }, undefined],
    ['a probe URL at an IPv6 host', { probeURL: 'http://[::1]:8080/' }, undefined],
    ['a port out of range', { port: 70000 }, /port must be an integer in 1\.\.65535/],
    ['a probe URL port out of range', { probeURL: 'http://127.0.0.1:99999/' }, /probeURL is not a valid URL/],
    ['a probe URL that is not http(s)', { probeURL: 'ftp://127.0.0.1/' }, /probeURL must be http or https/],
  ])('%s', (_n, over, problem) => {
    const got = probeTargetProblem(target(over));
    if (problem === undefined) expect(got).toBeUndefined();
    else expect(got).toMatch(problem);
  });
});

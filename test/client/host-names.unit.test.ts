// A request's target host, as leases and reports are keyed (client/src/crawlee/host-names.ts).
import { jest } from '@jest/globals';
import { authorityOf, hostOf, HostNames } from '../../client/src/crawlee/host-names.js';

const URLS: [string | undefined, string | undefined][] = [
  ['https://Shop.Example:8443/x', 'shop.example'],
  ['http://[::1]:8080/', '::1'],
  ['http://127.0.0.1:9/', '127.0.0.1'],
  ['http://user:pw@site.example/a@b', 'site.example'],
  ['http://site.example?next=http://other.example/', 'site.example'],
  ['http://site.example#http://other.example/', 'site.example'],
  ['http://site.example\\other.example/', 'site.example'],
  ['https://xn--bcher-kva.example/', 'xn--bcher-kva.example'],
  ['https://bücher.example/', 'xn--bcher-kva.example'],
  ['http://site.example', 'site.example'],
  ['HTTP://Site.Example/', 'site.example'],
  ['ftp://files.example/x', 'files.example'],
  ['http://', undefined],
  ['not a url', undefined],
  [undefined, undefined],
];

describe('the target host of a URL', () => {
  it.each(URLS)('hostOf(%p) is %p', (url, host) => {
    expect(hostOf(url)).toBe(host);
  });

  it.each(URLS)('remembered, %p is still %p, the first time and the next', (url, host) => {
    const hosts = new HostNames();
    expect([hosts.of(url), hosts.of(url)]).toEqual([host, host]);
  });

  it('remembers by authority: every path of a site is parsed once', () => {
    const hosts = new HostNames();
    const parsed: string[] = [];
    const spy = jest.spyOn(URL.prototype, 'hostname', 'get');
    try {
      for (const path of ['/a', '/b?c=1', '/d#e']) parsed.push(hosts.of(`https://shop.example${path}`)!);
      expect(parsed).toEqual(['shop.example', 'shop.example', 'shop.example']);
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('starts over when more authorities than its capacity were seen, and stays right', () => {
    const hosts = new HostNames(2);
    const seen = ['a', 'b', 'c', 'a'].map((h) => hosts.of(`http://${h}.example/p`));
    expect(seen).toEqual(['a.example', 'b.example', 'c.example', 'a.example']);
  });

  it.each([
    ['https://shop.example:8443/x?y', 'https://shop.example:8443'],
    ['http://site.example?q', 'http://site.example'],
    ['http://site.example', 'http://site.example'],
    ['http://a\\b', 'http://a'],
    ['ftp://files.example/', undefined],
    ['HTTP://Site.Example/', undefined],
  ])('the authority of %p is %p', (url, authority) => {
    expect(authorityOf(url)).toBe(authority);
  });
});

describe('a URL after another', () => {
  it.each([
    ['the same site, another path', 'https://shop.example/a', 'https://shop.example/b?c', 'shop.example'],
    [
      'a longer host that starts like the last one',
      'http://shop.example/a',
      'http://shop.example.evil/a',
      'shop.example.evil',
    ],
    ['a port after the last host', 'http://shop.example/a', 'http://shop.example:8080/a', 'shop.example'],
    ['the last one was not http', 'ftp://shop.example/a', 'http://other.example/', 'other.example'],
    [
      'the same authority with nothing after it',
      'http://shop.example/a',
      'http://shop.example',
      'shop.example',
    ],
  ])('%s: %p then %p is %p', (_, first, second, host) => {
    const hosts = new HostNames();
    hosts.of(first);
    expect(hosts.of(second)).toBe(host);
  });
});

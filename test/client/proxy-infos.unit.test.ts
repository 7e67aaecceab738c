// What Crawlee's newProxyInfo gives for a proxy URL, parsed once per URL
// (client/src/crawlee/proxy-infos.ts).
import { jest } from '@jest/globals';
import { ProxyConfiguration } from '@crawlee/core';
import { carrierOf, ProxyInfos } from '../../client/src/crawlee/proxy-infos.js';

const URLS = [
  'http://10.0.0.1:3128',
  'http://127.0.0.5:8080/',
  'http://proxy.example',
  'https://proxy.example:8443',
  'http://user:secret@10.0.0.2:3128',
  'http://us%40er:p%3Ass%2Fw@10.0.0.3:3128',
  'http://[::1]:3128',
];

describe('the proxy info of a proxy URL', () => {
  it.each(URLS)("is what Crawlee's own ProxyConfiguration gives for %p", async (url) => {
    const crawlee = await new ProxyConfiguration({ proxyUrls: [url] }).newProxyInfo('session_1');
    expect(new ProxyInfos().of(url, 'session_1')).toEqual(crawlee);
  });

  it('carries the session it is asked for, not the first one that asked', () => {
    const infos = new ProxyInfos();
    infos.of('http://10.0.0.1:3128', 'session_1');
    expect(infos.of('http://10.0.0.1:3128', 'session_2').sessionId).toBe('session_2');
    expect(infos.of('http://10.0.0.1:3128', undefined).sessionId).toBeUndefined();
  });

  it('parses each URL once, however many requests go through it', () => {
    const infos = new ProxyInfos();
    const spy = jest.spyOn(URL.prototype, 'hostname', 'get');
    try {
      for (let i = 0; i < 3; i++) {
        infos.of('http://10.0.0.1:3128', `s${i}`);
        infos.of('http://10.0.0.2:3128', `s${i}`);
      }
      expect(spy).toHaveBeenCalledTimes(2);
    } finally {
      spy.mockRestore();
    }
  });

  it('starts over once it holds `capacity` URLs, and still answers right', () => {
    const infos = new ProxyInfos(2);
    const spy = jest.spyOn(URL.prototype, 'hostname', 'get');
    try {
      for (const ip of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.1']) {
        expect(infos.of(`http://${ip}:3128`, 's').hostname).toBe(ip);
      }
      // The third URL emptied the memory: the first one is parsed again.
      expect(spy).toHaveBeenCalledTimes(4);
    } finally {
      spy.mockRestore();
    }
  });

  it('hands out a new object each time: a caller changing one does not change the next', () => {
    const infos = new ProxyInfos();
    const first = infos.of('http://10.0.0.1:3128', 's');
    first.hostname = 'changed';
    expect(infos.of('http://10.0.0.1:3128', 's').hostname).toBe('10.0.0.1');
  });
});

describe('the lease a proxy info carries to the post-navigation hook', () => {
  const lease = { leaseID: 'secret-lease-id' };

  it('is given back for the info it rides on, and for no other', () => {
    const infos = new ProxyInfos();
    expect(carrierOf(infos.of('http://10.0.0.1:3128', 's', lease))).toBe(lease);
    expect(carrierOf(infos.of('http://10.0.0.1:3128', 's'))).toBeUndefined();
    expect(carrierOf({ url: 'http://10.0.0.1:3128' })).toBeUndefined();
    expect(carrierOf(undefined)).toBeUndefined();
  });

  it("is out of sight of whoever reads, copies, compares or logs the info: only Crawlee's fields show", async () => {
    const info = new ProxyInfos().of('http://user:pw@10.0.0.1:3128', 's', lease);
    expect(Object.keys(info).sort()).toEqual(
      ['hostname', 'password', 'port', 'proxyTier', 'sessionId', 'url', 'username'].sort(),
    );
    expect(Object.getOwnPropertySymbols(info)).toEqual([]);
    expect(JSON.stringify(info)).not.toContain('secret-lease-id');
    expect(carrierOf({ ...info })).toBeUndefined();
    const crawlee = await new ProxyConfiguration({
      proxyUrls: ['http://user:pw@10.0.0.1:3128'],
    }).newProxyInfo('s');
    expect(info).toEqual(crawlee);
  });
});

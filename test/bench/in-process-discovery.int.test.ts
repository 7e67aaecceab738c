// The discovery API the crawl's warm-up and the per-request path bench run in their own
// process (bench/in-process-discovery.ts): the real app over the proxies they are given.
import { DiscoveryClient } from '../../client/src/index.js';
import {
  readyFleet,
  startInProcessDiscovery,
  type InProcessDiscovery,
} from '../../bench/in-process-discovery.js';

describe('the in-process discovery API', () => {
  let discovery: InProcessDiscovery | undefined;
  afterEach(async () => {
    await discovery?.stop();
    discovery = undefined;
  });

  it('lists every proxy it was given, each leasable, under the namespace it was given', async () => {
    const urls = ['http://127.0.99.1:40001', 'http://127.0.99.2:40002'];
    discovery = await startInProcessDiscovery(readyFleet(urls, 'warm-up'));
    const client = new DiscoveryClient({ baseUrl: discovery.url });

    const listed = await client.listProxies();
    expect(listed.map((p) => [p.id, `http://${p.ip}:${p.port}`, p.healthy]).sort()).toEqual([
      ['warm-up/proxy-0', 'http://127.0.99.1:40001', true],
      ['warm-up/proxy-1', 'http://127.0.99.2:40002', true],
    ]);
    const lease = await client.lease({ ttlSeconds: 30 });
    expect(urls).toContain(lease.proxy.url);
    await client.release(lease.leaseID);
  });

  it('caps each proxy at the leases it was given', async () => {
    discovery = await startInProcessDiscovery(readyFleet(['http://127.0.99.1:40001'], 'warm-up', 1));
    const client = new DiscoveryClient({ baseUrl: discovery.url });
    const first = await client.lease({ ttlSeconds: 30 });
    await expect(client.lease({ ttlSeconds: 30 })).rejects.toMatchObject({ code: 'all_busy' });
    await client.release(first.leaseID);
  });
});

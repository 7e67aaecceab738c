// Over a long crawl the client's per-proxy and per-host maps stay bounded by what is banned,
// dead or resting now (issue 47 item 7), not by every (proxy, host) pair ever seen.
import { ProxyVerdicts } from '../../client/src/crawlee/proxy-verdicts.js';
import { emptyStats } from '../../client/src/crawlee/shared-lease.js';
import { SitePaces } from '../../client/src/crawlee/site-paces.js';

describe("the client's maps over a long crawl", () => {
  it('bans and dead proxies: ended ones are swept as new ones come', () => {
    let now = 0;
    const verdicts = new ProxyVerdicts(() => now);
    // An hour of crawling 10,000 hosts: a ban of 60 s every 100 ms, a proxy dead every second.
    for (let i = 0; i < 36_000; i++) {
      now += 100;
      verdicts.ban(`proxy-${i % 500}`, `host-${i % 10_000}.example`, now + 60_000);
      if (i % 10 === 0) verdicts.markDead(`proxy-${i}`);
    }
    // At most a minute of bans (600) and of unacknowledged deaths (60), and a sweep's second.
    expect(verdicts.size).toBeLessThanOrEqual(600 + 60 + 20);
    expect(verdicts.isBanned(`proxy-${35_999 % 500}`, `host-${35_999 % 10_000}.example`)).toBe(true);
  });

  it('rests and paces: a 429 on a pair no lease holds keeps no pace, and ended rests are swept', () => {
    let now = 0;
    const paces = new SitePaces({
      leasesOf: () => [],
      usable: () => true,
      starved: () => undefined,
      stats: emptyStats(),
      maxWaitMs: 60_000,
      now: () => now,
    });
    for (let i = 0; i < 20_000; i++) {
      now += 50;
      paces.rateLimited(`proxy-${i % 1_000}`, `host-${i}.example`, i % 2 === 0 ? 1 : undefined);
    }
    // Rests of 1 s, one every 50 ms: about 20 live at once, plus up to 64 before a sweep; what
    // a host taught goes with its last lease (here it had none).
    expect(paces.size).toBeLessThanOrEqual(100);
  });
});

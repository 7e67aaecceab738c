// The error hook cannot go missing unnoticed (issue 45 item 2): `crawlerOptions()` wires the
// configuration's post-navigation hook and error handler in one call (and runs the crawler's
// own beside them), and a crawl whose errorHandler never runs ours says so, once, at error
// level, at its first retry. Real parts: a real Crawlee HttpCrawler, real forward proxies on
// loopback (one of them dead: its port refuses), a real site, the real discovery API in process.
import {
  Configuration,
  HttpCrawler,
  log as crawleeLog,
  LogLevel,
  type HttpCrawlingContext,
} from '@crawlee/http';
import { DiscoveryClient } from '../../client/src/index.js';
import { MISSING_ERROR_HANDLER, ProxyOperatorConfiguration } from '../../client/src/crawlee/index.js';
import { startCrawlSite, type CrawlSite } from '../../bench/crawl-site.js';
import { startFleet, type Fleet } from '../../bench/crawl-world.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';

const PAGES = 20;

type Wiring =
  'post-navigation only' | 'crawlerOptions()' | 'crawlerOptions(own)' | 'own errorHandler after the spread';

interface Outcome {
  errors: string[];
  fetched: number;
  ownErrors: number;
  config: ProxyOperatorConfiguration;
}

describe('a crawl whose error hook is missing is loud; one wired by crawlerOptions() is whole', () => {
  let fleet: Fleet;
  let site: CrawlSite;
  let server: TestDiscoveryServer;

  beforeAll(async () => {
    fleet = await startFleet(2, '127.0.9.1');
    // Proxy 0 is dead (its port refuses) and the fastest: the crawl's first lease is on it.
    await fleet.proxies[0]!.close();
  });
  afterAll(async () => {
    await fleet.close();
  });
  beforeEach(async () => {
    site = await startCrawlSite({ pages: PAGES });
    server = await startDiscoveryServer({
      proxies: fleet.proxies.map((p, i) =>
        proxy(`ns/p${i}`, { ip: p.host, port: p.port, latencyMillis: i === 0 ? 1 : 50 }),
      ),
    });
  });
  afterEach(async () => {
    await server.stop();
    await site.close();
  });

  async function crawlWith(wiring: Wiring): Promise<Outcome> {
    const errors: string[] = [];
    const config = new ProxyOperatorConfiguration({
      client: new DiscoveryClient({ baseUrl: server.baseUrl }),
      leaseAhead: false,
      log: { debug: () => undefined, warning: () => undefined, error: (m) => void errors.push(m) },
    });
    let fetched = 0;
    let ownErrors = 0;
    const own = () => void ownErrors++;
    const handle = async ({
      body,
      request,
      enqueueLinks,
    }: Pick<HttpCrawlingContext, 'body' | 'request' | 'enqueueLinks'>) => {
      fetched++;
      const hrefs = [...String(body).matchAll(/href="([^"]+)"/g)].map(
        (m) => new URL(m[1]!, request.url).href,
      );
      await enqueueLinks({ urls: hrefs });
    };
    const storage = () => new Configuration({ persistStorage: false, purgeOnStart: true });
    const base = { maxConcurrency: 2 };
    crawleeLog.setLevel(LogLevel.OFF);
    const crawler =
      wiring === 'post-navigation only'
        ? new HttpCrawler(
            {
              ...base,
              proxyConfiguration: config,
              postNavigationHooks: [config.postNavigationHook],
              requestHandler: (ctx) => handle(ctx),
            },
            storage(),
          )
        : wiring === 'crawlerOptions()'
          ? new HttpCrawler(
              { ...base, ...config.crawlerOptions(), requestHandler: (ctx) => handle(ctx) },
              storage(),
            )
          : wiring === 'crawlerOptions(own)'
            ? new HttpCrawler(
                {
                  ...base,
                  ...config.crawlerOptions({ errorHandler: own }),
                  requestHandler: (ctx) => handle(ctx),
                },
                storage(),
              )
            : new HttpCrawler(
                {
                  ...base,
                  ...config.crawlerOptions(),
                  errorHandler: own,
                  requestHandler: (ctx) => handle(ctx),
                },
                storage(),
              );
    await crawler.run([site.start]);
    await config.close();
    return { errors, fetched, ownErrors, config };
  }

  it.each<Wiring>(['post-navigation only', 'own errorHandler after the spread'])(
    '%s: the first retry logs one error naming crawlerOptions() and errorHandler, once',
    async (wiring) => {
      const { errors, fetched, config } = await crawlWith(wiring);
      expect(errors).toEqual([MISSING_ERROR_HANDLER]);
      expect(MISSING_ERROR_HANDLER).toMatch(/crawlerOptions\(\)/);
      expect(MISSING_ERROR_HANDLER).toMatch(/proxyConfiguration\.errorHandler\(ctx, error\)/);
      // The session retired with its request unanswered: taken for the proxy failing, and
      // reported, so the server (which has no health checks here) leased the dead proxy no more.
      expect(config.stats.errorHandlerMissing).toBe(1);
      expect(config.stats.reportedUnreachable).toBeGreaterThanOrEqual(1);
      expect(fetched).toBe(PAGES);
    },
  );

  it.each<Wiring>(['crawlerOptions()', 'crawlerOptions(own)'])(
    '%s: the dead proxy is reported unreachable, nothing is logged, and the own handler runs too',
    async (wiring) => {
      const { errors, fetched, ownErrors, config } = await crawlWith(wiring);
      expect(errors).toEqual([]);
      expect(config.stats).toMatchObject({ errorHandlerMissing: 0 });
      expect(config.stats.reportedUnreachable).toBeGreaterThanOrEqual(1);
      expect(fetched).toBe(PAGES);
      // The own handler ran for every failed attempt ours saw (at least the dead proxy's).
      if (wiring === 'crawlerOptions(own)') expect(ownErrors).toBeGreaterThanOrEqual(1);
      else expect(ownErrors).toBe(0);
    },
  );
});

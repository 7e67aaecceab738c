// What every crawling process does before anything is measured: a small crawl through
// Crawlee's own list and one through the integration (against the real discovery API, in
// this process), so that both sides' first measured pages run code that has run before.
//
// Crawlee loads got-scraping and its header model on the first request of a process (~150 ms
// of blocked event loop, seen with --cpu-prof): unwarmed, that cost fell on whichever side
// crawled first. The integration's own code and undici's are the same kind of one-time cost:
// warmed through the list alone, the operator's side spent 112-118 ms more CPU than the list's
// on its first 100 pages, 13-37 ms with both paths warmed (docs/benchmarks.md). Each side runs
// both warm-ups, the same work, whichever path it then crawls through.
import { crawl } from './crawl-scenario.js';
import { startLocalWorld } from './crawl-world.js';
import { readyFleet, startInProcessDiscovery } from './in-process-discovery.js';

const PAGES = 200;
const PROXIES = 5;
const NAMESPACE = 'warm-up';

export async function warmUp(): Promise<void> {
  const noFaults = { banned: [], dying: [], dieAtFraction: 1 };
  const world = await startLocalWorld({
    proxies: PROXIES,
    first: '127.0.99.1',
    pages: PAGES,
    retryAfterSeconds: 1,
  });
  try {
    await crawl({ world, faults: noFaults });
    const discovery = await startInProcessDiscovery(readyFleet(world.urls, NAMESPACE));
    try {
      await crawl({
        world,
        faults: noFaults,
        operator: { discoveryURL: discovery.url, proxyID: (i) => `${NAMESPACE}/proxy-${i}` },
      });
    } finally {
      await discovery.stop();
    }
  } finally {
    await world.close();
  }
}

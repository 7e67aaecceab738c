// What one crawl of `bench:crawl` runs against: its forward proxies and its site, the faults
// the crawl injects into them (bans, deaths), and the site's record, read once the crawl is
// done. Either in the crawling process (`localWorld`: the test, sequential rounds) or in a
// process of its own (crawl-world-process.ts, `--world-apart`), as a real fleet and a real
// site are other machines: then the crawling process's CPU is the crawler's alone, and the
// operator's health probes through the proxies are not charged to the crawl.
import { LoopbackAddresses } from '../providers/mock/loopback-addresses.js';
import { startForwardProxy, type ForwardProxy } from '../providers/mock/forward-proxy.js';
import { blackHoles, type BlackHoles } from './black-hole.js';
import { startCrawlSite, type CrawlSite, type Limiter, type SiteHit } from './crawl-site.js';

export interface Fleet {
  proxies: ForwardProxy[];
  urls: string[];
  close(): Promise<void>;
}

/** N real forward proxies, each on its own loopback address (the site tells them apart by it). */
export async function startFleet(count: number, first = '127.0.4.1'): Promise<Fleet> {
  const addresses = new LoopbackAddresses(first);
  const proxies: ForwardProxy[] = [];
  for (let i = 0; i < count; i++) {
    proxies.push(await addresses.bind((host) => startForwardProxy({ host, port: 0 })));
  }
  return {
    proxies,
    urls: proxies.map((p) => `http://${p.host}:${p.port}`),
    close: async () => void (await Promise.allSettled(proxies.map((p) => p.close()))),
  };
}

export interface SiteRecord {
  /** Every request the site answered: its source, status and time (ms since the epoch). */
  hits: SiteHit[];
  /** When each banned source first got a 403. */
  firstRefusal: Map<string, number>;
}

export interface CrawlWorld {
  /** Proxy i's URL. */
  urls: string[];
  /** Proxy i's source address: the site tells proxies apart by it. */
  hosts: string[];
  /** The site's first page, where the crawl starts. */
  start: string;
  /** How many pages the site has. */
  pages: number;
  /** Requests per second one source may send (undefined: no limit). */
  rateLimitPerSecond?: number;
  /** The site answers 403 to these sources from now on. */
  ban(hosts: string[]): Promise<void>;
  /** Kills these proxies (listener closed, sockets destroyed); resolves with when they died. */
  kill(indices: number[]): Promise<number>;
  /** The site's record so far. */
  record(): Promise<SiteRecord>;
  /** CPU ms the world's own process has spent so far (only a world apart has one). */
  cpuMs?(): Promise<number>;
}

/** What a world is made of: the fleet and the site. */
export interface WorldConfig {
  proxies: number;
  /** The fleet's first loopback address. */
  first: string;
  pages: number;
  rateLimitPerSecond?: number;
  retryAfterSeconds: number;
  /** The site's 429s carry `Retry-After` (default true). */
  retryAfterHeader?: boolean;
  /** How the site counts a source's rate (default a token bucket). */
  limiter?: Limiter;
  /** How a proxy dies: its port refuses (default), or a black hole takes its address. */
  deathBy?: 'refuse' | 'black-hole';
}

/** A world someone started, and must close. */
export interface RunningWorld extends CrawlWorld {
  /** Proxy i's port. */
  ports: number[];
  close(): Promise<void>;
}

/** Starts a fleet and a site in this process, as a world. */
export async function startLocalWorld(config: WorldConfig): Promise<RunningWorld> {
  const fleet = await startFleet(config.proxies, config.first);
  const site = await startCrawlSite({
    pages: config.pages,
    ...(config.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: config.rateLimitPerSecond }),
    retryAfterSeconds: config.retryAfterSeconds,
    ...(config.retryAfterHeader === undefined ? {} : { retryAfterHeader: config.retryAfterHeader }),
    ...(config.limiter === undefined ? {} : { limiter: config.limiter }),
  });
  const holes: BlackHoles[] = [];
  const world = localWorld(fleet, site);
  return {
    ...world,
    ...(config.deathBy === 'black-hole'
      ? {
          // The proxies close, then their addresses turn into black holes.
          kill: async (indices: number[]) => {
            const at = Date.now();
            const dying = indices.map((i) => fleet.proxies[i]!);
            await Promise.all(dying.map((p) => p.close()));
            holes.push(await blackHoles(dying.map((p) => `${p.host}:${p.port}`)));
            return at;
          },
        }
      : {}),
    ports: fleet.proxies.map((p) => p.port),
    close: async () => {
      for (const hole of holes) hole.close();
      await fleet.close();
      await site.close();
    },
  };
}

/** A world whose fleet and site run in this process. */
export function localWorld(fleet: Fleet, site: CrawlSite): CrawlWorld {
  return {
    urls: fleet.urls,
    hosts: fleet.proxies.map((p) => p.host),
    start: site.start,
    pages: site.pages.length,
    ...(site.rateLimitPerSecond === undefined ? {} : { rateLimitPerSecond: site.rateLimitPerSecond }),
    ban: async (hosts) => {
      for (const host of hosts) site.ban(host);
    },
    kill: async (indices) => {
      const at = Date.now();
      for (const i of indices) void fleet.proxies[i].close();
      return at;
    },
    record: async () => ({ hits: site.hits, firstRefusal: site.firstRefusal }),
  };
}

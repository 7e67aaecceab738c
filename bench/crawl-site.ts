// The crawl benchmark's web site: P linked pages that answer 403 to the source addresses it
// bans (each forward proxy connects out from its own loopback address) and 429 to a source
// above its rate limit, recording every request with its source and time.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SiteHit {
  from: string;
  status: number;
  at: number;
}

export interface CrawlSite {
  start: string;
  pages: string[];
  hits: SiteHit[];
  /** Sources answered 403 from now on. */
  ban(address: string): void;
  /** When each banned source first got a 403. */
  firstRefusal: Map<string, number>;
  /** Requests per second one source may send (undefined: no limit). */
  rateLimitPerSecond?: number;
  close(): Promise<void>;
}

/**
 * How the site counts a source's requests against its limit: a one-second token bucket
 * (refilled continuously) or a sliding window (at most `limit` answered in the last second).
 */
export type Limiter = 'bucket' | 'sliding';

export interface CrawlSiteOptions {
  pages: number;
  /** Requests per second one source may send before it gets 429s (undefined: no limit). */
  rateLimitPerSecond?: number;
  /** The Retry-After of a 429, in seconds. */
  retryAfterSeconds?: number;
  /** Whether a 429 carries Retry-After at all (default true; most sites send none). */
  retryAfterHeader?: boolean;
  limiter?: Limiter;
}

/** Page i links to i+1 (every page is reachable from page 0) and to two pseudo-random others. */
export function linksOf(i: number, count: number): number[] {
  return [...new Set([(i + 1) % count, (i * 7 + 3) % count, (i * 13 + 5) % count])].filter((j) => j !== i);
}

/** Page i of a site of `count` pages: its heading and its links (linksOf). */
export function pageHTML(i: number, count: number): string {
  const links = linksOf(i, count)
    .map((j) => `<li><a href="/page/${j}">page ${j}</a></li>`)
    .join('');
  return `<!doctype html><html><body><h1>page ${i}</h1><ul>${links}</ul></body></html>`;
}

export async function startCrawlSite(options: CrawlSiteOptions): Promise<CrawlSite> {
  const { pages: count } = options;
  const hits: SiteHit[] = [];
  const banned = new Set<string>();
  const firstRefusal = new Map<string, number>();
  // A one-second token bucket per source: `limit` requests, refilled continuously.
  const buckets = new Map<string, { tokens: number; at: number }>();
  const limit = options.rateLimitPerSecond;
  const windows = new Map<string, number[]>();
  const overWindow = (from: string, now: number): boolean => {
    let answered = windows.get(from);
    if (answered === undefined) windows.set(from, (answered = []));
    while (answered.length > 0 && answered[0]! <= now - 1000) answered.shift();
    if (answered.length >= limit!) return true;
    answered.push(now);
    return false;
  };
  const overLimit = (from: string, now: number): boolean => {
    if (limit === undefined) return false;
    if (options.limiter === 'sliding') return overWindow(from, now);
    const bucket = buckets.get(from) ?? { tokens: limit, at: now };
    bucket.tokens = Math.min(limit, bucket.tokens + ((now - bucket.at) / 1000) * limit);
    bucket.at = now;
    buckets.set(from, bucket);
    if (bucket.tokens < 1) return true;
    bucket.tokens--;
    return false;
  };
  const server: Server = createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '';
    const now = Date.now();
    const match = /^\/page\/(\d+)$/.exec(req.url ?? '');
    const i = match ? Number(match[1]) : -1;
    let status = i >= 0 && i < count ? 200 : 404;
    if (banned.has(from)) {
      status = 403;
      if (!firstRefusal.has(from)) firstRefusal.set(from, now);
    } else if (status === 200 && overLimit(from, now)) status = 429;
    hits.push({ from, status, at: now });
    if (status !== 200) {
      const headers: Record<string, string> = { 'content-type': 'text/plain' };
      if (status === 429 && options.retryAfterHeader !== false)
        headers['retry-after'] = String(options.retryAfterSeconds ?? 1);
      res.writeHead(status, headers).end(`${status}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(pageHTML(i, count));
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  // 'localhost': the mock forward proxies reach loopback targets from their own address.
  const base = `http://localhost:${port}`;
  const pages = Array.from({ length: count }, (_, i) => `${base}/page/${i}`);
  return {
    start: pages[0],
    pages,
    hits,
    firstRefusal,
    ...(limit === undefined ? {} : { rateLimitPerSecond: limit }),
    ban: (address) => void banned.add(address),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

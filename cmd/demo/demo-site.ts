import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { siteAnswer, sourceAddress, type SiteHistory } from './site-rules.js';

export interface DemoSite {
  /** The first page, e.g. http://localhost:8091/ (what the Crawlee recipe of docs/crawling.md crawls). */
  url: string;
  pages: number;
  /** The strict site's rate (`--site`); undefined = every page answers 200 to everyone. */
  ratePerSecond?: number;
  /** Answers 403 to requests from this exit address from now on (strict site only). */
  ban(address: string): void;
  close(): Promise<void>;
}

/**
 * The demo's site to crawl: a handful of linked pages on loopback, so the Crawlee
 * recipe, pasted as it is, has something to crawl through the demo's proxies. With
 * `strict`, it also behaves like a site that defends itself (site-rules.ts): 403 to a banned
 * exit address, 429 with Retry-After above a per-source rate.
 */
export async function startDemoSite(
  port: number,
  pages = 10,
  strict?: { ratePerSecond: number },
): Promise<DemoSite> {
  const banned = new Set<string>();
  const history: SiteHistory = new Map();
  const server: Server = createServer((req, res) => {
    const match = /^\/(?:page\/(\d+))?$/.exec(req.url ?? '');
    const i = match ? Number(match[1] ?? 0) : -1;
    if (!(i >= 0 && i < pages)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page\n');
      return;
    }
    if (strict) {
      const source = sourceAddress(req.socket.remoteAddress);
      const answer = siteAnswer({ banned, ratePerSecond: strict.ratePerSecond }, history, source, Date.now());
      if (answer.kind === 'banned') {
        res.writeHead(403, { 'content-type': 'text/plain' }).end(`banned: ${source}\n`);
        return;
      }
      if (answer.kind === 'rate_limited') {
        res
          .writeHead(429, { 'content-type': 'text/plain', 'retry-after': String(answer.retryAfterSeconds) })
          .end(`too many requests from ${source}: ${strict.ratePerSecond} per second\n`);
        return;
      }
    }
    // A chain: / (page 0) links to /page/1, … the last page links nowhere.
    const link = i + 1 < pages ? `<a href="/page/${i + 1}">page ${i + 1}</a>` : 'the end';
    res
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end(`<!doctype html><html><body><h1>demo page ${i}</h1>${link}</body></html>`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://localhost:${bound}/`,
    pages,
    ...(strict ? { ratePerSecond: strict.ratePerSecond } : {}),
    ban: (address) => {
      banned.add(address);
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// A local web site of N linked HTML pages for crawl tests. It records every request with the
// client address it came from (each mock forward proxy connects out from its own address)
// and refuses, with 403, the addresses it is told to.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pageHTML } from '../../bench/crawl-site.js';

export interface SiteHit {
  path: string;
  /** The client address the request came from: the forward proxy's own loopback address. */
  from: string;
  status: number;
  /** The crawl's issue order, from the x-crawl-seq header the crawler's hook stamps. */
  seq: number | undefined;
}

export interface LinkedSite {
  /** The first page. */
  start: string;
  /** Every page's absolute URL. */
  pages: string[];
  hits: SiteHit[];
  /** From now on, answer 403 to requests from this address. */
  refuse(address: string): void;
  /**
   * From now on, answer 403 to every request from whichever address sends the next one: the
   * proxy that carries a crawl's first request, so a test never waits on a proxy the crawl
   * happens not to pick (a slow machine crawls with fewer sessions, on fewer proxies).
   */
  refuseNextArrival(): void;
  /** The addresses refused so far. */
  refused(): string[];
  close(): Promise<void>;
}

export async function startLinkedSite(options: { pages: number; hostname: string }): Promise<LinkedSite> {
  const { pages: count } = options;
  const hits: SiteHit[] = [];
  const refused = new Set<string>();
  let refuseNext = false;
  const server: Server = createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '';
    if (refuseNext) {
      refused.add(from);
      refuseNext = false;
    }
    const seqHeader = req.headers['x-crawl-seq'];
    const seq = typeof seqHeader === 'string' ? Number(seqHeader) : undefined;
    const path = req.url ?? '';
    const match = /^\/page\/(\d+)$/.exec(path);
    const i = match ? Number(match[1]) : -1;
    const status = refused.has(from) ? 403 : i >= 0 && i < count ? 200 : 404;
    hits.push({ path, from, status, seq });
    if (status !== 200) {
      res
        .writeHead(status, { 'content-type': 'text/plain' })
        .end(status === 403 ? 'refused\n' : 'no such page\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(pageHTML(i, count));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://${options.hostname}:${port}`;
  const pages = Array.from({ length: count }, (_, i) => `${base}/page/${i}`);
  return {
    start: pages[0],
    pages,
    hits,
    refuse: (address) => void refused.add(address),
    refuseNextArrival: () => {
      refuseNext = true;
    },
    refused: () => [...refused],
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

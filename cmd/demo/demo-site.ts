import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DemoSite {
  /** The first page, e.g. http://localhost:8091/ (what the Crawlee recipe of docs/crawling.md crawls). */
  url: string;
  pages: number;
  close(): Promise<void>;
}

/**
 * The demo's site to crawl: a handful of linked pages on loopback, so the Crawlee
 * recipe, pasted as it is, has something to crawl through the demo's proxies.
 */
export async function startDemoSite(port: number, pages = 10): Promise<DemoSite> {
  const server: Server = createServer((req, res) => {
    const match = /^\/(?:page\/(\d+))?$/.exec(req.url ?? '');
    const i = match ? Number(match[1] ?? 0) : -1;
    if (!(i >= 0 && i < pages)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page\n');
      return;
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
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

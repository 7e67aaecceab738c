// Loopback sites for the Scrapy crawls that note each request's path, source address and time
// (so a test tells a request through a leased proxy from one sent directly), over HTTP or HTTPS
// (a self-signed certificate made with openssl at the start; Scrapy does not verify by default).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface Hit {
  path: string;
  from: string;
  at: number;
}

export interface Site {
  origin: string;
  hits: Hit[];
  close(): Promise<void>;
}

/** A site that notes each request's path and source: /redirect?to=URL is a 302, /forbidden a
 * 403, /page/N one of `pages` linked pages, anything else a 200. */
function handler(hits: Hit[], pages: number) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://site');
    hits.push({ path: url.pathname + url.search, from: req.socket.remoteAddress ?? '', at: Date.now() });
    const to = url.searchParams.get('to');
    if (url.pathname === '/redirect' && to) {
      res.writeHead(302, { location: to }).end();
      return;
    }
    if (url.pathname === '/forbidden') {
      res.writeHead(403, { 'content-type': 'text/plain' }).end('forbidden');
      return;
    }
    const page = /^\/page\/(\d+)$/.exec(url.pathname);
    if (page) {
      const i = Number(page[1]);
      const links = [(i + 1) % pages, (i * 7 + 3) % pages].map((j) => `<a href="/page/${j}">${j}</a>`);
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body>${links.join(' ')}</body></html>`);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  };
}

async function listen(server: Server, host: string, scheme: 'http' | 'https', hits: Hit[]): Promise<Site> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    origin: `${scheme}://${host}:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function startSite(host: string, pages = 10): Promise<Site> {
  const hits: Hit[] = [];
  return listen(createServer(handler(hits, pages)), host, 'http', hits);
}

/** An HTTPS site with a self-signed certificate made here (Scrapy does not verify by default). */
export function startTlsSite(host: string, dir: string): Promise<Site> {
  const key = join(dir, 'site.key');
  const cert = join(dir, 'site.crt');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      `/CN=${host}`,
      '-addext',
      `subjectAltName=IP:${host}`,
    ],
    { stdio: 'ignore' },
  );
  const hits: Hit[] = [];
  const server = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, handler(hits, 10));
  return listen(server, host, 'https', hits);
}

/** The shortest gap (ms) between two requests the site got from one source. */
export function shortestGap(hits: Hit[]): number {
  const bySource = new Map<string, number[]>();
  for (const h of hits) bySource.set(h.from, [...(bySource.get(h.from) ?? []), h.at]);
  let shortest = Infinity;
  for (const times of bySource.values()) {
    times.sort((a, b) => a - b);
    for (let i = 1; i < times.length; i++) shortest = Math.min(shortest, times[i]! - times[i - 1]!);
  }
  return shortest;
}

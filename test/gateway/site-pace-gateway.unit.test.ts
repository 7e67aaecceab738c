// The gateway keeps a site's pace per upstream on plain HTTP (gateway/site-pace.ts): crawled
// on real parts (gateway-world.ts: the gateway, three real forward proxies on their own
// addresses, the memory book) against a real local site that allows each source address 4
// requests in any sliding second and answers 429 beyond (bench:crawl's tight sliding window,
// where the gateway fetched 123 of 200 pages). Twelve workers, one gateway session each,
// retry a page on 429 or 503 as a crawler does.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basic, startWorld, viaGateway, type World } from './gateway-world.js';

let world: World | undefined;
let site: Server | undefined;
afterEach(async () => {
  await world?.close();
  site?.closeAllConnections();
  await new Promise((r) => (site ? site.close(r) : r(undefined)));
  world = undefined;
  site = undefined;
});

const LIMIT = 4;

/** A site allowing each source LIMIT answered requests in any sliding second (429s do not count). */
async function slidingSite(
  retryAfter: string | undefined,
): Promise<{ port: number; hits: { status: number }[] }> {
  const answered = new Map<string, number[]>();
  const hits: { status: number }[] = [];
  site = createServer((req, res) => {
    const from = req.socket.remoteAddress ?? '';
    const now = Date.now();
    const times = answered.get(from) ?? [];
    while (times.length > 0 && times[0]! <= now - 1000) times.shift();
    answered.set(from, times);
    const limited = times.length >= LIMIT;
    if (!limited) times.push(now);
    hits.push({ status: limited ? 429 : 200 });
    const body = limited ? 'slow down\n' : `${from}\n`;
    res.writeHead(limited ? 429 : 200, {
      'content-type': 'text/plain',
      'content-length': String(body.length),
      ...(limited && retryAfter !== undefined ? { 'retry-after': retryAfter } : {}),
    });
    res.end(body);
  });
  await new Promise<void>((r) => site!.listen(0, '127.0.0.1', r));
  return { port: (site.address() as AddressInfo).port, hits };
}

interface Crawl {
  fetched: number;
  failed: number;
  answers: Map<number, number>;
}

/** `pages` pages by `workers` workers, each with its own session, each page tried up to 6 times. */
async function crawl(w: World, sitePort: number, pages: number, workers: number): Promise<Crawl> {
  const out: Crawl = { fetched: 0, failed: 0, answers: new Map() };
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      while (next < pages) {
        const page = next++;
        for (let attempt = 1; ; attempt++) {
          const answer = await viaGateway(
            w.port,
            `http://127.0.0.1:${sitePort}/page/${page}`,
            basic(`session-w${i}`),
          );
          out.answers.set(answer.status, (out.answers.get(answer.status) ?? 0) + 1);
          if (answer.status === 200) {
            out.fetched++;
            break;
          }
          if (attempt === 6) {
            out.failed++;
            break;
          }
        }
      }
    }),
  );
  return out;
}

async function metric(w: World, name: string): Promise<number> {
  const text = await w.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
}

describe("the gateway keeps each upstream's pace for a rate-limiting site", () => {
  it.each([
    ['without Retry-After', undefined],
    ['with Retry-After: 1', '1'],
  ])(
    '%s: every page, no 503, 429s only while it learns',
    async (_name, retryAfter) => {
      const { port, hits } = await slidingSite(retryAfter);
      world = await startWorld();
      const run = await crawl(world, port, 60, 12);
      expect(run.failed).toBe(0);
      expect(run.fetched).toBe(60);
      expect(run.answers.get(503) ?? 0).toBe(0);
      // The first second's second round meets the limit through each of the 3 proxies before
      // any 429 has taught a pace (12 requests in flight); after that the pace keeps them out.
      expect(run.answers.get(429) ?? 0).toBeLessThanOrEqual(20);
      expect(hits.filter((h) => h.status === 429).length).toBe(run.answers.get(429) ?? 0);
      expect(await metric(world, 'proxy_operator_gateway_paced_requests_total')).toBeGreaterThan(0);
    },
    60_000,
  );
});

describe('a turn past the wait bound', () => {
  it("answers 503 site_paced at once, with the turn's Retry-After, and sends nothing to the site", async () => {
    world = await startWorld({ idleMs: 5000 });
    const base = `http://127.0.0.1:${world.site.httpPort}`;
    // The site's 429 says come back in 30 s: the session's proxy rests that long for the site.
    const limited = await viaGateway(world.port, `${base}/slow-limit`, basic('session-p1'));
    expect(limited.status).toBe(429);
    const seen = world.site.seen.length;
    const started = Date.now();
    const paced = await viaGateway(world.port, `${base}/`, basic('session-p1'));
    expect(paced.status).toBe(503);
    expect(paced.headers['x-gateway-error']).toMatch(/^site_paced: /);
    expect(Number(paced.headers['retry-after'])).toBeGreaterThan(20);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(world.site.seen.length).toBe(seen);
    expect(await world.registry.getSingleMetricAsString('proxy_operator_gateway_requests_total')).toMatch(
      /outcome="paced"} 1/,
    );
  });
});

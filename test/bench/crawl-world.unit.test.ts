import { fileURLToPath } from 'node:url';
import { fetch, ProxyAgent } from 'undici';
import { startLocalWorld, type CrawlWorld, type RunningWorld } from '../../bench/crawl-world.js';
import { startWorldProcess } from '../../bench/crawl-world-process.js';

const tsHooks = fileURLToPath(new URL('../harness/ts-hooks.ts', import.meta.url));

// The same world, run in the crawling process (the test, sequential rounds) or apart
// (--world-apart): a crawl must see no difference but where the CPU goes.
const kinds: [string, (first: string) => Promise<RunningWorld>][] = [
  [
    'in the crawling process',
    (first) => startLocalWorld({ proxies: 3, first, pages: 5, retryAfterSeconds: 1 }),
  ],
  [
    'in a process of its own',
    (first) =>
      startWorldProcess(
        { proxies: 3, first, pages: 5, retryAfterSeconds: 1 },
        { nodeFlags: ['--import', tsHooks] },
      ),
  ],
];

/** The status of page `page` fetched through proxy `i`, or the error that stopped it. */
async function through(world: CrawlWorld, i: number, page = 0): Promise<string> {
  const dispatcher = new ProxyAgent(world.urls[i]!);
  try {
    const url = world.start.replace(/\/page\/0$/, `/page/${page}`);
    return String((await fetch(url, { dispatcher })).status);
  } catch (err) {
    return `failed: ${(err as Error).message}`;
  } finally {
    await dispatcher.close();
  }
}

describe.each(kinds)("a crawl's world %s", (kind, start) => {
  let world: RunningWorld;
  beforeEach(async () => {
    // Each kind on loopback addresses of its own, apart from every other test's.
    world = await start(kind === 'in the crawling process' ? '127.0.97.1' : '127.0.98.1');
  });
  afterEach(() => world.close());

  it('has a proxy per address and a site of linked pages', () => {
    expect(world.urls).toHaveLength(3);
    expect(new Set(world.hosts).size).toBe(3);
    world.urls.forEach((url, i) => expect(url).toContain(`//${world.hosts[i]}:`));
    expect(world.pages).toBe(5);
    expect(world.start).toMatch(/^http:\/\/localhost:\d+\/page\/0$/);
  });

  it('records each request with the source address of the proxy it came through', async () => {
    expect(await through(world, 0)).toBe('200');
    expect(await through(world, 2, 4)).toBe('200');
    const { hits } = await world.record();
    expect(hits.map((h) => ({ from: h.from, status: h.status }))).toEqual([
      { from: world.hosts[0], status: 200 },
      { from: world.hosts[2], status: 200 },
    ]);
  });

  it('answers 403 to a banned source from the ban on, and records its first refusal', async () => {
    expect(await through(world, 1)).toBe('200');
    const before = Date.now();
    await world.ban([world.hosts[1]!]);
    expect(await through(world, 1)).toBe('403');
    expect(await through(world, 0)).toBe('200');
    const { firstRefusal } = await world.record();
    expect([...firstRefusal.keys()]).toEqual([world.hosts[1]]);
    expect(firstRefusal.get(world.hosts[1]!)).toBeGreaterThanOrEqual(before);
  });

  it('kills proxies on demand and says when: they carry nothing after, the others still do', async () => {
    expect(await through(world, 2)).toBe('200');
    const before = Date.now();
    const at = await world.kill([2]);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(await through(world, 2)).toMatch(/^failed/);
    expect(await through(world, 0)).toBe('200');
  });
});

describe("a crawl's world in a process of its own", () => {
  it("counts that process's CPU, which grows with the requests it serves", async () => {
    const world = await startWorldProcess(
      { proxies: 1, first: '127.0.96.1', pages: 5, retryAfterSeconds: 1 },
      { nodeFlags: ['--import', tsHooks] },
    );
    try {
      const before = await world.cpuMs();
      for (let i = 0; i < 20; i++) expect(await through(world, 0, i % 5)).toBe('200');
      expect(await world.cpuMs()).toBeGreaterThan(before);
    } finally {
      await world.close();
    }
  });

  it('ends when closed, and a closed world refuses further requests with an error', async () => {
    const world = await startWorldProcess(
      { proxies: 1, first: '127.0.96.1', pages: 5, retryAfterSeconds: 1 },
      { nodeFlags: ['--import', tsHooks] },
    );
    await world.close();
    await expect(world.record()).rejects.toThrow(/exited/);
  });
});

// bench:crawl's matrix (issue 45 item 3): its cells cover every axis the issue names, and the
// world's new behaviours are real: a sliding-window site, 429s without Retry-After, and a proxy
// that dies as a black hole (its address accepts nothing: a connect times out).
import { connect } from 'node:net';
import { fetch, ProxyAgent } from 'undici';
import { cells } from '../../bench/crawl-matrix.js';
import { startLocalWorld, type RunningWorld } from '../../bench/crawl-world.js';

describe("the matrix's cells", () => {
  const all = cells(20, 1);
  it('cover both limiters, loose and tight, with and without Retry-After, on every side', () => {
    const rate = all.filter((c) => c.site.rateLimitPerSecond !== undefined);
    const keys = rate.map((c) => `${c.site.limiter}/${c.site.rateLimitPerSecond}/${c.site.retryAfterHeader}`);
    expect(new Set(keys).size).toBe(8);
    for (const c of rate) expect(c.sides).toEqual(['operator', 'list', 'gateway']);
  });
  it('ban two proxies from the start and at 30 %, and kill two by refusal and by black hole', () => {
    const bans = all.filter((c) => c.faults.banned.length > 0);
    expect(bans.map((c) => c.faults.banAtFraction ?? 0)).toEqual([0, 0.3]);
    for (const c of bans) expect(c.faults.banned).toHaveLength(2);
    const deaths = all.filter((c) => c.faults.dying.length > 0);
    expect(deaths.map((c) => c.deathBy)).toEqual(['refuse', 'black-hole']);
    // The post-navigation hook alone is measured where it matters: where proxies die.
    for (const c of deaths) expect(c.sides).toContain('operator, post-navigation hook only');
  });
});

async function statusThrough(
  world: RunningWorld,
  i: number,
): Promise<{ status: number; retryAfter: string | null }> {
  const dispatcher = new ProxyAgent(world.urls[i]!);
  try {
    const answer = await fetch(world.start, { dispatcher });
    await answer.arrayBuffer();
    return { status: answer.status, retryAfter: answer.headers.get('retry-after') };
  } finally {
    await dispatcher.close();
  }
}

describe("the matrix's world", () => {
  let world: RunningWorld | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  });

  it('a sliding window of 3/s answers the 4th request in a second 429, without Retry-After when told', async () => {
    world = await startLocalWorld({
      proxies: 1,
      first: '127.0.96.1',
      pages: 3,
      retryAfterSeconds: 1,
      rateLimitPerSecond: 3,
      limiter: 'sliding',
      retryAfterHeader: false,
    });
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await statusThrough(world, 0));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
    expect(answers[3]!.retryAfter).toBeNull();
    // A bucket would have refilled a token in 1/3 s; the window frees one only when the first leaves it.
    await new Promise((r) => setTimeout(r, 400));
    expect((await statusThrough(world, 0)).status).toBe(429);
  });

  it('a proxy killed as a black hole takes no connection: a connect to it times out', async () => {
    world = await startLocalWorld({
      proxies: 2,
      first: '127.0.96.11',
      pages: 3,
      retryAfterSeconds: 1,
      deathBy: 'black-hole',
    });
    expect((await statusThrough(world, 0)).status).toBe(200);
    await world.kill([0]);
    const { hostname, port } = new URL(world.urls[0]!);
    const outcome = await new Promise<string>((resolve) => {
      const socket = connect(Number(port), hostname);
      const timer = setTimeout(() => (socket.destroy(), resolve('timed out')), 1_500);
      socket.once('connect', () => (clearTimeout(timer), socket.destroy(), resolve('connected')));
      socket.once('error', (e: NodeJS.ErrnoException) => (clearTimeout(timer), resolve(e.code ?? 'error')));
    });
    expect(outcome).toBe('timed out');
    expect((await statusThrough(world, 1)).status).toBe(200);
  });
});

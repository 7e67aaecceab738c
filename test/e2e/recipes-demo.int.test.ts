// Issue 49 item 4: the plain-HTTP recipes of docs/crawling.md (curl, Python requests), pasted
// unchanged, against the demo a user runs (`npm run demo -- --token …`, a child process on
// loopback), including what must never happen: with a mistyped API port or `409 all_busy` a
// recipe stops with a non-zero exit and nothing reaches the site (curl -x "" would have fetched
// directly), and a site that is down (502 from a healthy proxy) reports nothing against the
// proxy. The site is the test's own (it counts every request it gets); the API, the proxies and
// their credentials are the demo's.
import { freePort } from '../../framework/testing/control-plane.js';
import { startLinkedSite, type LinkedSite } from '../client/linked-site.js';
import { cleanEnv, failingRecipe, runRecipe, type Recipe } from '../client/docs-recipes.js';
import { startDemoProcess, type DemoProcess } from './demo-process.js';

const TOKEN = 'recipes-demo-token';
const RECIPES: Recipe[] = ['curl', 'python'];
let demo: DemoProcess;
let site: LinkedSite;

beforeAll(async () => {
  site = await startLinkedSite({ pages: 3, hostname: '127.0.0.1' });
  demo = await startDemoProcess(['--token', TOKEN]);
}, 660_000);

afterAll(async () => {
  await demo?.stop();
  await site?.close();
}, 120_000);

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${demo.discoveryURL}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
  });

/** The demo's lease reports so far, by result (proxy_operator_lease_reports_total). */
async function reports(): Promise<Record<string, number>> {
  const text = await (await fetch(`${demo.metricsURL}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^proxy_operator_lease_reports_total\{result="(\w+)"\} (\d+)/gm))
    counts[m[1]] = Number(m[2]);
  return counts;
}

async function activeLeases(): Promise<number> {
  const body = (await (await api('/v1/proxies')).json()) as { items: { activeLeases: number }[] };
  return body.items.reduce((sum, p) => sum + p.activeLeases, 0);
}

const env = (extra: Record<string, string> = {}) =>
  cleanEnv({ DISCOVERY: demo.discoveryURL, TOKEN, SITE: site.pages[1], HOST: '127.0.0.1', ...extra });

it.each(RECIPES)(
  '%s: leases from the demo, fetches through its proxy, reports ok, releases',
  async (recipe) => {
    const before = site.hits.length;
    const { stdout } = await runRecipe(recipe, env());
    expect(stdout.trim().split('\n').pop()).toMatch(/^200 ok via \S+$/);
    // It went through one of the demo's proxies (their own loopback addresses), not directly.
    const hits = site.hits.slice(before);
    expect(hits).toHaveLength(1);
    expect(hits[0].from).not.toBe('127.0.0.1');
    expect(await activeLeases()).toBe(0);
  },
  60_000,
);

it.each(RECIPES)(
  '%s: a mistyped API port stops it with a non-zero exit, and nothing reaches the site',
  async (recipe) => {
    const before = site.hits.length;
    const wrong = `http://127.0.0.1:${await freePort()}`;
    const err = await failingRecipe(recipe, env({ DISCOVERY: wrong }));
    expect(err.code).not.toBe(0);
    expect(err.stdout ?? '').not.toMatch(/via/);
    expect(site.hits.length).toBe(before);
  },
  60_000,
);

it.each(RECIPES)(
  '%s: 409 all_busy stops it with a non-zero exit naming the code, and nothing reaches the site',
  async (recipe) => {
    // Every proxy of the demo at its maxLeases.
    const held: string[] = [];
    try {
      for (let i = 0; i < 50; i++) {
        const res = await api('/v1/leases', { method: 'POST', body: '{}' });
        if (res.status !== 201) {
          expect(res.status).toBe(409);
          expect(((await res.json()) as { error: string }).error).toBe('all_busy');
          break;
        }
        held.push(((await res.json()) as { leaseID: string }).leaseID);
      }
      expect(held.length).toBeGreaterThan(0);
      const before = site.hits.length;
      const err = await failingRecipe(recipe, env());
      expect(err.code).not.toBe(0);
      expect(`${err.stdout ?? ''}${err.stderr ?? ''}`).toMatch(/all_busy/);
      expect(err.stdout ?? '').not.toMatch(/via/);
      expect(site.hits.length).toBe(before);
    } finally {
      for (const id of held) await api(`/v1/leases/${id}`, { method: 'DELETE' });
    }
    expect(await activeLeases()).toBe(0);
  },
  60_000,
);

it.each([
  // The demo's Managed proxies carry credentials in their URL; its External one has none.
  { recipe: 'curl' as const, printed: /^502 none via http:\/\/(\S+@)?127\.0\.0\.\d+:\d+$/ },
  { recipe: 'python' as const, printed: /^502 None via default\/demo-\w+$/ },
])(
  '$recipe: a site that is down (502 from the healthy proxy) reports nothing against the proxy',
  async ({ recipe, printed }) => {
    const before = await reports();
    const down = `http://127.0.0.1:${await freePort()}/page/1`;
    const { stdout } = await runRecipe(recipe, env({ SITE: down }));
    expect(stdout.trim().split('\n').pop()).toMatch(printed);
    expect(await reports()).toEqual(before);
    expect(await activeLeases()).toBe(0);
  },
  60_000,
);

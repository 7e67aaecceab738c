import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { ProxyAgent, request } from 'undici';
import { demoArgs } from '../../cmd/demo/args.js';
import { startDemoEnvironment, type DemoEnvironment } from '../../cmd/demo/environment.js';
import { runDemoFlow, type DemoSummary } from '../../cmd/demo/flow.js';

// Issue 49 item 5: a demo to test a client against. `npm run demo -- --no-wait --token …
// --proxies 3 --site`, parsed by the demo's own parser, on its own control plane: the auth
// path is exercised and the local site bans one proxy and rate-limits the others.
const root = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'demo-test-token';
let env: DemoEnvironment;
let summary: DemoSummary;
const printed: string[] = [];

beforeAll(async () => {
  const args = demoArgs(['--no-wait', '--token', TOKEN, '--proxies', '3', '--site', '--site-rate', '3']);
  if (args.kind !== 'run') throw new Error(`demoArgs: ${JSON.stringify(args)}`);
  const { kind: _kind, wait: _wait, ...options } = args;
  env = await startDemoEnvironment({ root, logger: pino({ level: 'silent' }), progress: () => {}, options });
  summary = await runDemoFlow(env, (line) => printed.push(line), 'kubectl');
}, 300_000);

afterAll(async () => {
  await env?.close();
});

describe('the demo with --token, --proxies 3 and --site', () => {
  it('creates three Managed proxies beside the External one, all Ready and listed', () => {
    expect(summary.ready).toEqual(['demo-managed', 'demo-managed-2', 'demo-managed-3', 'demo-external']);
    expect(summary.listed).toBe(4);
    // Step 6 still walks every proxy into a cooldown: 409 all_cooling_down at the end.
    expect(summary.allCoolingDownStatus).toBe(409);
    expect(summary.releaseStatuses).toEqual([204, 404, 204, 204, 204]);
  });

  it('closes the discovery API: 401 without the token, 401 with a wrong one, 200 with it', async () => {
    const without = await request(`${env.discoveryURL}/v1/proxies`);
    expect(without.statusCode).toBe(401);
    expect(((await without.body.json()) as { error: string }).error).toBe('unauthorized');
    const wrong = await request(`${env.discoveryURL}/v1/proxies`, {
      headers: { authorization: 'Bearer not-the-token' },
    });
    expect(wrong.statusCode).toBe(401);
    await wrong.body.dump();
    const withToken = await request(`${env.discoveryURL}/v1/proxies`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(withToken.statusCode).toBe(200);
    expect(((await withToken.body.json()) as { items: unknown[] }).items).toHaveLength(4);
  });

  it('the gateway takes the same token, and refuses a request without it (407)', async () => {
    expect(summary.gatewayStatus).toBe(200);
    expect(Object.values(summary.exitIPs)).toContain(summary.gatewayBody.trim());
    const noToken = new ProxyAgent(`http://${env.gateway.address}`);
    try {
      const res = await request(env.target.exitIPURL, { dispatcher: noToken });
      expect(res.statusCode).toBe(407);
      await res.body.dump();
    } catch (err) {
      // undici turns a 407 to a plain proxy request into an error on some paths.
      expect(String(err)).toMatch(/407/);
    } finally {
      await noToken.close();
    }
  });

  it('prints every discovery API call with the Authorization header, so it can be pasted', () => {
    const discovery = printed.filter((l) => l.startsWith('$ curl ') && l.includes(env.discoveryURL));
    expect(discovery.length).toBeGreaterThanOrEqual(9);
    for (const c of discovery) expect(c).toContain(` -H 'Authorization: Bearer ${TOKEN}' `);
    expect(printed.join('\n')).toContain(`http://session-demo1:${TOKEN}@${env.gateway.address}`);
  });

  it("the site answers 403 through the banned proxy (demo-external's exit), 200 through the others", () => {
    const site = summary.site!;
    expect(site.bannedProxy).toBe('default/demo-external');
    expect(site.bannedExit).toBe(summary.exitIPs['demo-external']);
    expect(site.statuses).toEqual({
      'default/demo-managed': 200,
      'default/demo-managed-2': 200,
      'default/demo-managed-3': 200,
      'default/demo-external': 403,
    });
  });

  it('rate-limits each exit: 429 with Retry-After above 3 requests per second, then the report is taken', () => {
    const site = summary.site!;
    // One request through this proxy came before the burst; the burst is 3 + 2 long.
    expect(site.burst).toHaveLength(5);
    expect(site.burst).toContain(429);
    expect(site.burst.filter((s) => s === 200).length).toBeLessThanOrEqual(2);
    expect(site.burst.every((s) => s === 200 || s === 429)).toBe(true);
    expect(Number(site.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(site.reportStatus).toBeLessThan(300);
    expect(site.releaseStatuses.every((s) => s === 204)).toBe(true);
  });

  // docs/crawling.md: the Crawlee recipe, unchanged, with DISCOVERY_TOKEN, crawls the strict
  // site through the closed API: every page, despite the ban and the rate limit.
  it("runs the docs' Crawlee recipe with DISCOVERY_TOKEN against the strict site: every page", async () => {
    const run = promisify(execFile);
    const doc = readFileSync(join(root, 'docs/crawling.md'), 'utf8');
    const block = /<!-- checked: crawlee\b[^>]*-->\n```ts\n([\s\S]*?)\n```/.exec(doc);
    expect(block).not.toBeNull();
    await run(process.execPath, [
      join(root, 'node_modules/typescript/bin/tsc'),
      '-p',
      join(root, 'client/tsconfig.json'),
    ]);
    await mkdir(join(root, 'build'), { recursive: true });
    const script = join(root, 'build', 'readme-crawlee-strict.mjs');
    await writeFile(script, block![1]);
    const storage = await mkdtemp(join(tmpdir(), 'readme-crawlee-strict-'));
    try {
      const { stdout } = await run(process.execPath, [script], {
        cwd: storage,
        env: {
          ...process.env,
          DISCOVERY_URL: env.discoveryURL,
          DISCOVERY_TOKEN: TOKEN,
          START_URL: env.site.url,
          CRAWLEE_STORAGE_DIR: storage,
        },
        timeout: 120_000,
      });
      const fetched = new Set(stdout.split('\n').filter((l) => l.startsWith('fetched ')));
      expect([...fetched].sort()).toEqual(
        [
          env.site.url,
          ...Array.from({ length: env.site.pages - 1 }, (_, i) => `${env.site.url}page/${i + 1}`),
        ]
          .map((u) => `fetched ${u}`)
          .sort(),
      );
    } finally {
      await rm(storage, { recursive: true, force: true });
    }
  }, 180_000);
});

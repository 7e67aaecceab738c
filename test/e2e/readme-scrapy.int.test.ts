// The Scrapy block of docs/crawling.md (marked `<!-- checked: scrapy -->`), pasted into a file
// and run with `scrapy runspider` from the venv .ci/run makes, against the local demo (its
// operator, proxies and site): it crawls every page of the demo site through leased proxies,
// without a warning, and the spider's close leaves no lease behind.
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startDemoEnvironment, type DemoEnvironment } from '../../cmd/demo/environment.js';
import { runDemoFlow } from '../../cmd/demo/flow.js';
import { DiscoveryClient } from '../../client/src/index.js';
import { cleanEnv, runToEnd, VENV, venvPython } from '../python/python-env.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const DOCS = join(root, 'docs/crawling.md');

function checkedBlock(name: string): string {
  const match = new RegExp(`<!-- checked: ${name}\\b[^>]*-->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(
    readFileSync(DOCS, 'utf8'),
  );
  if (!match) throw new Error(`docs/crawling.md has no block marked <!-- checked: ${name} -->`);
  return match[1];
}

let env: DemoEnvironment;
let dir: string;

beforeAll(async () => {
  venvPython();
  env = await startDemoEnvironment({ root, logger: pino({ level: 'silent' }), progress: () => {} });
  // The walkthrough brings the demo's proxies to Ready, as `npm run demo` does before "Your turn".
  await runDemoFlow(env, () => {}, 'kubectl');
  dir = await mkdtemp(join(tmpdir(), 'readme-scrapy-'));
}, 300_000);

afterAll(async () => {
  await env?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it("docs/crawling.md's Scrapy spider crawls the demo site through leased proxies and releases them", async () => {
  const spider = join(dir, 'demo_spider.py');
  await writeFile(spider, checkedBlock('scrapy'));
  const out = join(dir, 'pages.jsonl');
  await runToEnd(
    join(VENV, 'bin/scrapy'),
    ['runspider', spider, '-O', out, '-s', 'LOG_LEVEL=WARNING'],
    cleanEnv({ DISCOVERY_URL: env.discoveryURL, START_URL: env.site.url }),
    dir,
  );
  const pages = (await readFile(out, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { url: string; proxy: string });
  expect(new Set(pages.map((p) => p.url)).size).toBe(env.site.pages);
  for (const page of pages) expect(page.proxy).toMatch(/^http:\/\/127\./);
  const proxies = await new DiscoveryClient({ baseUrl: env.discoveryURL }).listProxies();
  expect(proxies.reduce((sum, p) => sum + p.activeLeases, 0)).toBe(0);
}, 180_000);

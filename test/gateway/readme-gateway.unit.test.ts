// The README's "Crawling through the gateway" examples, run as written (the blocks marked
// `<!-- checked: gateway-curl -->` and `<!-- checked: gateway-python -->`) against a real
// gateway over real forward proxies and the real lease book (gateway-world.ts).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { GATEWAY_NAME, OPERATOR_NAMESPACE } from '../../charts/names.js';
import { DEFAULT_GATEWAY_SETTINGS } from '../../handlers/settings.js';
import { parseUsername } from '../../gateway/username.js';
import { PROXY_IPS, startWorld, TOKEN, type World } from './gateway-world.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const README = readFileSync(join(root, 'README.md'), 'utf8');
const section = README.slice(
  README.indexOf('## Crawling through the gateway'),
  README.indexOf('## The local demo'),
);
// The venv .ci/run makes has requests; python3 with requests otherwise (README, Requirements).
const PYTHON = existsSync(join(root, '.ci/moto/bin/python')) ? join(root, '.ci/moto/bin/python') : 'python3';

function checkedBlock(name: string): string {
  const match = new RegExp(`<!-- checked: ${name} -->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(section);
  if (!match) throw new Error(`the README's gateway section has no block marked <!-- checked: ${name} -->`);
  return match[1];
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return { ...env, ...extra };
}

let world: World;
beforeAll(async () => {
  world = await startWorld();
});
afterAll(() => world.close());

describe("the README's gateway examples", () => {
  const env = (shell: Record<string, string> = {}) =>
    cleanEnv({
      TOKEN,
      GATEWAY: `127.0.0.1:${world.port}`,
      SITE: `http://127.0.0.1:${world.site.httpPort}/`,
      ...shell,
    });

  // A reader's shell may exempt hosts from proxies (NO_PROXY): curl would then fetch the site
  // directly, -x or not, and the site would see the crawler's own address.
  it.each<[string, Record<string, string>]>([
    ['a shell without proxy settings', {}],
    ['a shell whose NO_PROXY names the site', { NO_PROXY: 'localhost,127.0.0.1' }],
    ['a shell whose no_proxy exempts every host', { no_proxy: '*' }],
  ])('curl, from %s: fetches through a proxy of the fleet, one exit IP for the session', async (_, shell) => {
    const outputs = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', checkedBlock('gateway-curl')], {
        env: env(shell),
      });
      const [ip, status] = stdout.trim().split('\n');
      expect(status).toBe('200');
      expect(PROXY_IPS).toContain(ip);
      outputs.add(ip);
    }
    expect(outputs.size).toBe(1);
  });

  it.each<[string, Record<string, string>]>([
    ['a shell without proxy settings', {}],
    ['a shell whose NO_PROXY names the site', { NO_PROXY: 'localhost,127.0.0.1' }],
  ])('Python requests, from %s: the same', async (_, shell) => {
    const { stdout } = await run(PYTHON, ['-c', checkedBlock('gateway-python')], { env: env(shell) });
    const [status, ip] = stdout.trim().split(' ');
    expect(status).toBe('200');
    expect(PROXY_IPS).toContain(ip);
  });

  it("the Scrapy and Crawlee settings name the chart's gateway Service (from a client namespace), the default port and a username of the grammar", () => {
    const service = `${GATEWAY_NAME}.${OPERATOR_NAMESPACE}`.replaceAll('.', '\\.');
    const urls = [...section.matchAll(new RegExp(`http://(session-[^:]+):[^@]+@${service}:(\\d+)`, 'g'))];
    expect(urls.length).toBeGreaterThanOrEqual(2);
    for (const [, username, port] of urls) {
      expect(Number(port)).toBe(DEFAULT_GATEWAY_SETTINGS.port);
      const sample = username.replace(/\$\{\w+\}|\{\w+\}/g, 'abc');
      expect(parseUsername(sample, { attributeKeys: new Set(), maxTTLSeconds: 3600 }).ok).toBe(true);
    }
  });
});

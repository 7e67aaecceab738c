// Runs the plain-HTTP examples of docs/crawling.md, "Using it from a crawler" (the blocks marked
// `<!-- checked: curl -->` and `<!-- checked: python -->`; the README links the page) against the real discovery API, a
// real forward proxy and a local site, so the documentation cannot rot. Needs bash, curl,
// and python3 with requests (README, Requirements).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from '../../framework/testing/control-plane.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';
import { startLinkedSite, type LinkedSite } from './linked-site.js';

const run = promisify(execFile);
const README = fileURLToPath(new URL('../../docs/crawling.md', import.meta.url));
const TOKEN = 'readme-token';

/** The code of the fenced block right after `<!-- checked: <name> ... -->`. */
function checkedBlock(name: string): string {
  const text = readFileSync(README, 'utf8');
  const match = new RegExp(`<!-- checked: ${name}\\b[^>]*-->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(
    text,
  );
  if (!match) throw new Error(`docs/crawling.md has no block marked <!-- checked: ${name} -->`);
  return match[1];
}

/** This process's environment without proxy variables (the examples must reach loopback directly). */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return { ...env, ...extra };
}

const EXAMPLES = {
  curl: (code: string, env: NodeJS.ProcessEnv) => run('bash', ['-euo', 'pipefail', '-c', code], { env }),
  python: (code: string, env: NodeJS.ProcessEnv) =>
    run('python3', ['-c', code], { env }).catch((err: { stderr?: string }) => {
      if (/No module named 'requests'/.test(err.stderr ?? '')) {
        throw new Error(
          'the Python example of docs/crawling.md needs requests: python3 -m pip install requests',
          {
            cause: err,
          },
        );
      }
      throw err;
    }),
};

describe('the docs examples for plain HTTP', () => {
  let server: TestDiscoveryServer;
  let forward: ForwardProxy;
  let site: LinkedSite;

  beforeEach(async () => {
    forward = await startForwardProxy({ host: '127.0.0.45', port: 0 });
    site = await startLinkedSite({ pages: 3, hostname: '127.0.0.1' });
    server = await startDiscoveryServer({
      token: TOKEN,
      proxies: [proxy('ns/readme', { ip: forward.host, port: forward.port })],
    });
  });
  afterEach(async () => {
    await server.stop();
    await site.close();
    await forward.close();
  });

  it.each([
    {
      example: 'curl' as const,
      refused: false,
      dead: false,
      result: 'ok',
      printed: `200 ok via http://127.0.0.45:PORT`,
    },
    {
      example: 'curl' as const,
      refused: true,
      dead: false,
      result: 'banned',
      printed: `403 banned via http://127.0.0.45:PORT`,
    },
    {
      example: 'curl' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: `000 unreachable via http://127.0.0.45:PORT`,
    },
    {
      example: 'python' as const,
      refused: false,
      dead: false,
      result: 'ok',
      printed: '200 ok via ns/readme',
    },
    {
      example: 'python' as const,
      refused: true,
      dead: false,
      result: 'banned',
      printed: '403 banned via ns/readme',
    },
    {
      example: 'python' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: '0 unreachable via ns/readme',
    },
  ])(
    '$example: leases, fetches through the proxy, reports $result, releases',
    async ({ example, refused, dead, result, printed }) => {
      if (refused) site.refuse(forward.host);
      // A dead proxy: the address the lease names refuses connections.
      if (dead) await forward.close();
      const env = cleanEnv({ DISCOVERY: server.baseUrl, TOKEN, SITE: site.pages[1], HOST: '127.0.0.1' });
      const { stdout } = await EXAMPLES[example](checkedBlock(example), env);
      expect(stdout.trim().split('\n').pop()).toBe(printed.replace('PORT', String(forward.port)));
      const calls = server.requests.map((r) => r.call);
      expect(calls.filter((c) => c === 'POST /v1/leases')).toHaveLength(1);
      expect(server.requests.find((r) => r.call === 'POST /v1/leases')?.response).toMatchObject({
        target: '127.0.0.1',
        session: { key: 'checkout-42' },
      });
      expect(server.requests.find((r) => /\/report$/.test(r.call))?.response).toMatchObject({
        result,
        target: '127.0.0.1',
      });
      const leaseID = (server.requests[0].response as { leaseID: string }).leaseID;
      if (example === 'curl') expect(calls).toContain(`POST /v1/leases/${leaseID}/renew`);
      expect(calls.some((c) => /^DELETE \/v1\/leases\//.test(c))).toBe(true);
      expect(await server.activeLeases()).toBe(0);
    },
  );
});

// What must never happen: a fetch without a proxy when the lease fails, and a healthy proxy
// blamed for a site that is down.
describe('the docs examples for plain HTTP, when things fail', () => {
  let server: TestDiscoveryServer;
  let forward: ForwardProxy;
  let site: LinkedSite;

  beforeEach(async () => {
    forward = await startForwardProxy({ host: '127.0.0.47', port: 0 });
    site = await startLinkedSite({ pages: 3, hostname: '127.0.0.1' });
    server = await startDiscoveryServer({
      token: TOKEN,
      proxies: [proxy('ns/only', { ip: forward.host, port: forward.port, maxLeases: 1 })],
    });
  });
  afterEach(async () => {
    await server.stop();
    await site.close();
    await forward.close();
  });

  const failing = (example: 'curl' | 'python', env: NodeJS.ProcessEnv) =>
    EXAMPLES[example](checkedBlock(example), env).then(
      () => {
        throw new Error(`the ${example} example exited 0`);
      },
      (err: { code?: number; stdout?: string; stderr?: string }) => err,
    );

  it.each(['curl' as const, 'python' as const])(
    '%s: a wrong API port stops it with a non-zero exit, and nothing reaches the site',
    async (example) => {
      const closed = `http://127.0.0.1:${await freePort()}`;
      const env = cleanEnv({ DISCOVERY: closed, TOKEN, SITE: site.pages[1], HOST: '127.0.0.1' });
      const err = await failing(example, env);
      expect(err.code).not.toBe(0);
      expect(err.stdout ?? '').not.toMatch(/via/);
      expect(site.hits).toHaveLength(0);
    },
  );

  it.each(['curl' as const, 'python' as const])(
    '%s: 409 all_busy stops it with a non-zero exit naming the code, and nothing reaches the site',
    async (example) => {
      // The only proxy's one slot is taken.
      const taken = await fetch(`${server.baseUrl}/v1/leases`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(taken.status).toBe(201);
      const env = cleanEnv({ DISCOVERY: server.baseUrl, TOKEN, SITE: site.pages[1], HOST: '127.0.0.1' });
      const err = await failing(example, env);
      expect(err.code).not.toBe(0);
      expect(`${err.stdout ?? ''}${err.stderr ?? ''}`).toMatch(/all_busy/);
      expect(site.hits).toHaveLength(0);
    },
  );

  it.each([
    { example: 'curl' as const, printed: `502 none via http://127.0.0.47:PORT` },
    { example: 'python' as const, printed: '502 None via ns/only' },
  ])(
    '$example: a site that is down (502 from a healthy proxy) reports nothing against the proxy',
    async ({ example, printed }) => {
      const down = `http://127.0.0.1:${await freePort()}/page/1`;
      const env = cleanEnv({ DISCOVERY: server.baseUrl, TOKEN, SITE: down, HOST: '127.0.0.1' });
      const { stdout } = await EXAMPLES[example](checkedBlock(example), env);
      expect(stdout.trim().split('\n').pop()).toBe(printed.replace('PORT', String(forward.port)));
      expect(server.requests.some((r) => /\/report$/.test(r.call))).toBe(false);
      expect(await server.activeLeases()).toBe(0);
    },
  );
});

// Runs the plain-HTTP examples of docs/crawling.md, "Using it from a crawler" (the blocks marked
// `<!-- checked: curl -->` and `<!-- checked: python -->`; the README links the page) against the real discovery API, a
// real forward proxy and a local site, so the documentation cannot rot: ok, a ban, a dead proxy.
// What must never happen (a mistyped port, 409 all_busy, a site that is down) is run against
// `npm run demo` itself: test/e2e/recipes-demo.int.test.ts. Needs bash, curl, and python3 with
// requests (README, Requirements).
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from './discovery-server.js';
import { cleanEnv, runRecipe } from './docs-recipes.js';
import { startLinkedSite, type LinkedSite } from './linked-site.js';

const TOKEN = 'readme-token';

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

  it.each<{
    shell: Record<string, string>;
    example: 'curl' | 'python';
    refused: boolean;
    dead: boolean;
    result: string;
    printed: string;
  }>([
    {
      shell: {},
      example: 'curl' as const,
      refused: false,
      dead: false,
      result: 'ok',
      printed: `200 ok via http://127.0.0.45:PORT`,
    },
    {
      shell: {},
      example: 'curl' as const,
      refused: true,
      dead: false,
      result: 'banned',
      printed: `403 banned via http://127.0.0.45:PORT`,
    },
    {
      shell: {},
      example: 'curl' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: `000 unreachable via http://127.0.0.45:PORT`,
    },
    {
      shell: {},
      example: 'python' as const,
      refused: false,
      dead: false,
      result: 'ok',
      printed: '200 ok via ns/readme',
    },
    {
      shell: {},
      example: 'python' as const,
      refused: true,
      dead: false,
      result: 'banned',
      printed: '403 banned via ns/readme',
    },
    {
      shell: {},
      example: 'python' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: '0 unreachable via ns/readme',
    },
    // A shell whose NO_PROXY names the site: curl skips -x for it unless the recipe says
    // --noproxy '' (the dead proxy's page would then come back 200, fetched directly).
    {
      shell: { NO_PROXY: 'localhost,127.0.0.1' },
      example: 'curl' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: `000 unreachable via http://127.0.0.45:PORT`,
    },
    {
      shell: { NO_PROXY: 'localhost,127.0.0.1' },
      example: 'python' as const,
      refused: false,
      dead: true,
      result: 'unreachable',
      printed: '0 unreachable via ns/readme',
    },
  ])(
    '$example (the shell: $shell): leases, fetches through the proxy, reports $result, releases',
    async ({ shell, example, refused, dead, result, printed }) => {
      if (refused) site.refuse(forward.host);
      // A dead proxy: the address the lease names refuses connections.
      if (dead) await forward.close();
      const env = cleanEnv({
        DISCOVERY: server.baseUrl,
        TOKEN,
        SITE: site.pages[1],
        HOST: '127.0.0.1',
        ...shell,
      });
      const { stdout } = await runRecipe(example, env);
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

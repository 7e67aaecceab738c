// The Python package's pytest suites from `npm test`: the pure tables (python/tests/unit),
// both clients against the real discovery API started here with a token (python/tests/live),
// and the clients' `exclude` and the Scrapy add-on's lease book against a fleet two teams share
// (python/tests/fleet: four proxies, two named tokens, and a front playing an operator older
// than `exclude`). Warnings are errors (python/pyproject.toml), so a Scrapy deprecation fails it.
import { ApiTokens } from '../../book/api-tokens.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy } from '../book/fixtures.js';
import {
  startDiscoveryServer,
  startPredatingFront,
  type TestDiscoveryServer,
} from '../client/discovery-server.js';
import { cleanEnv, runToEnd, venvPython } from './python-env.js';

const TOKEN = 'pytest-token';

it('pytest: the ban policy, the pacing, the lease sharing, renewal, targets and the add-on settings', async () => {
  const { stdout } = await runToEnd(
    venvPython(),
    ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'python/tests/unit'],
    cleanEnv(),
  );
  expect(stdout).toMatch(/\d+ passed/);
  expect(stdout).not.toMatch(/failed|error/);
}, 120_000);

it('the package is typed: mypy --strict finds nothing in python/src', async () => {
  const { stdout } = await runToEnd(venvPython(), ['-m', 'mypy', '--strict', 'python/src'], cleanEnv());
  expect(stdout).toMatch(/^Success: no issues found/m);
}, 120_000);

describe('pytest against the real discovery API', () => {
  let server: TestDiscoveryServer;
  let forward: ForwardProxy;
  beforeAll(async () => {
    forward = await startForwardProxy({ host: '127.0.0.46', port: 0 });
    server = await startDiscoveryServer({
      token: TOKEN,
      proxies: [proxy('demo/p0', { ip: forward.host, port: forward.port })],
    });
  });
  afterAll(async () => {
    await server?.stop();
    await forward?.close();
  });

  it('the sync and async clients: every call, and 401, 404, 409 and 400 as errors naming the code', async () => {
    const { stdout } = await runToEnd(
      venvPython(),
      ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'python/tests/live'],
      cleanEnv({ DISCOVERY_URL: server.baseUrl, DISCOVERY_TOKEN: TOKEN }),
    );
    expect(stdout).toMatch(/6 passed/);
    expect(await server.activeLeases()).toBe(0);
  }, 120_000);
});

describe('pytest against a fleet two teams share (issue 48)', () => {
  const TEAM_A = 'pytest-team-a-token';
  const TEAM_B = 'pytest-team-b-token';
  let server: TestDiscoveryServer;
  let older: Awaited<ReturnType<typeof startPredatingFront>>;
  beforeAll(async () => {
    server = await startDiscoveryServer({
      tokens: new ApiTokens(
        new Map([
          ['team-a', TEAM_A],
          ['team-b', TEAM_B],
        ]),
      ),
      // Never connected to: leasing reads the catalog only.
      proxies: [0, 1, 2, 3].map((i) => proxy(`fleet/p${i}`, { ip: `127.0.0.${60 + i}`, maxLeases: 10 })),
    });
    older = await startPredatingFront(server.baseUrl, { field: 'exclude' });
  });
  afterAll(async () => {
    await older?.stop();
    await server?.stop();
  });

  it("exclude skips, refuses and is checked; the add-on's lease book spreads over every proxy beside another team's leases and shares a host's pace across sessions", async () => {
    const { stdout } = await runToEnd(
      venvPython(),
      ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'python/tests/fleet'],
      cleanEnv({
        DISCOVERY_URL: server.baseUrl,
        DISCOVERY_TOKEN: TEAM_A,
        DISCOVERY_TOKEN_OTHER: TEAM_B,
        DISCOVERY_URL_PREDATING: older.baseUrl,
      }),
    );
    expect(stdout).toMatch(/7 passed/);
    expect(stdout).not.toMatch(/failed|error/);
    // The predating front refused the one ask that named exclude, and nothing is left leased.
    expect(older.refused).toBe(1);
    expect(await server.activeLeases()).toBe(0);
  }, 120_000);
});

// The Python package's pytest suites from `npm test`: the pure tables (python/tests/unit) and
// both clients against the real discovery API started here with a token (python/tests/live).
// Warnings are errors (python/pyproject.toml), so a Scrapy deprecation fails it.
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { proxy } from '../book/fixtures.js';
import { startDiscoveryServer, type TestDiscoveryServer } from '../client/discovery-server.js';
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

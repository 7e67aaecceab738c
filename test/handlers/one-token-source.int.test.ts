// The discovery API and the gateway read one source of client tokens: one load, one watcher
// of the tokens file, one set of its metrics. A token revoked in the file is refused by both
// doors after the same reload (not by one door now and the other up to an interval later).
// Wrong tokens are counted once for both doors, per source address.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { request } from 'undici';
import { freePort } from '../../framework/testing/control-plane.js';
import { DiscoveryRunner } from '../../handlers/discovery-runner.js';
import { GatewayRunner } from '../../handlers/gateway-runner.js';
import type { PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { DEFAULT_GATEWAY_SETTINGS, DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import {
  createNamespace,
  eventually,
  quiet,
  startOperator,
  type RunningOperator,
} from './operator-fixture.js';

const kc = testKubeConfig();
const namespace = uniqueName('one-tokens');
const A = 'team-a-token-0123456789abcdef';
const B = 'team-b-token-0123456789abcdef';
const RELOADED = 'discovery API tokens reloaded';

let op: RunningOperator;
let mock: MockProvider;
let gatewayPort: number;
let file: string;
const logLines: string[] = [];

/** The API's answer to a list with this bearer token. */
async function apiStatus(token: string): Promise<number> {
  const res = await request(`${op.discoveryURL}/v1/proxies`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await res.body.dump();
  return res.statusCode;
}

/** The API's answer to a list with this bearer token, sent from `localAddress`. */
function apiStatusFrom(token: string, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${op.discoveryURL}/v1/proxies`, {
      localAddress,
      headers: { authorization: `Bearer ${token}` },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The gateway's answer to a plain-HTTP request with this token as the proxy password. */
function gatewayStatus(token: string, localAddress = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: '127.0.0.1',
      localAddress,
      port: gatewayPort,
      method: 'GET',
      path: 'http://127.0.0.1:9/nothing',
      headers: {
        host: '127.0.0.1:9',
        'proxy-authorization': `Basic ${Buffer.from(`:${token}`).toString('base64')}`,
      },
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const reloads = () => logLines.filter((l) => l.includes(RELOADED)).length;

beforeAll(async () => {
  await installProxyCrd(kc);
  await createNamespace(kc, namespace);
  file = join(mkdtempSync(join(tmpdir(), 'one-tokens-')), 'tokens');
  writeFileSync(file, `team-a: ${A}\nteam-b: ${B}\n`);
  mock = new MockProvider('mock', { provisioningSeconds: 0.3 }, quiet);
  gatewayPort = await freePort();
  const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });
  op = await startOperator(
    kc,
    { mock },
    namespace,
    {
      discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, tokensFile: file },
      gateway: { ...DEFAULT_GATEWAY_SETTINGS, host: '127.0.0.1', port: gatewayPort, connectTimeoutMs: 500 },
    },
    [DiscoveryRunner, GatewayRunner] as typeof PROXY_HANDLERS,
    logger,
  );
}, 60_000);

afterAll(async () => {
  await op?.stop();
  await mock?.close();
});

describe('one token source for the discovery API and the gateway', () => {
  it('a token deleted from the file is refused by both doors after one reload', async () => {
    expect(await apiStatus(B)).toBe(200);
    expect(await gatewayStatus(B)).not.toBe(407);
    expect(await gatewayStatus('not-a-token-of-anyone-000')).toBe(407);

    writeFileSync(file, `team-a: ${A}\n`);
    await eventually(
      'the API refuses the revoked token',
      async () => (await apiStatus(B)) === 401 || undefined,
    );
    // The same reload, the same moment: the gateway refuses it too, with no second interval.
    expect(await gatewayStatus(B)).toBe(407);
    expect(await apiStatus(A)).toBe(200);
    expect(await gatewayStatus(A)).not.toBe(407);

    // One watcher: the change is read once, not once per door. Two intervals (2 s each) give
    // a second watcher every chance to log its own reload.
    await new Promise((r) => setTimeout(r, 4_500));
    expect(reloads()).toBe(1);
    // The file's metrics are one series in the process's registry, counted by the one watcher.
    const usable = await op.registry.getSingleMetric('proxy_operator_discovery_tokens_file_usable')?.get();
    expect(usable?.values).toEqual([expect.objectContaining({ value: 1 })]);
  }, 30_000);

  it('a token added to the file is let in by both doors after one reload', async () => {
    const C = 'team-c-token-0123456789abcdef';
    expect(await gatewayStatus(C)).toBe(407);
    const before = reloads();
    writeFileSync(file, `team-a: ${A}\nteam-c: ${C}\n`);
    await eventually('the API lets the new token in', async () => (await apiStatus(C)) === 200 || undefined);
    expect(await gatewayStatus(C)).not.toBe(407);
    await new Promise((r) => setTimeout(r, 4_500));
    expect(reloads()).toBe(before + 1);
  }, 30_000);

  // From an address of its own (the other cases' failures are 127.0.0.1's).
  it('wrong tokens count once for both doors: 20 at the gateway, and the API refuses the next with 429', async () => {
    const from = '127.0.0.5';
    for (let i = 0; i < 20; i++) expect(await gatewayStatus(`guess-${i}-0123456789abcdef`, from)).toBe(407);
    expect(await apiStatusFrom('guess-20-0123456789abcdef', from)).toBe(429);
    expect(await gatewayStatus('guess-21-0123456789abcdef', from)).toBe(429);
    // Another address is not held back by this one's guesses.
    expect(await apiStatusFrom('guess-22-0123456789abcdef', '127.0.0.6')).toBe(401);
  }, 30_000);
});

// The repair hold's direct check fetches each probe URL from the operator itself, without a
// proxy (handlers/health-runner.ts). A probe URL is anyone's who may create a Proxy, so the
// check keeps to the rule the External endpoints keep to (providers config, `external:`):
// nothing in loopback, link-local, the metadata addresses, the unspecified addresses or the
// cluster's CIDRs unless the config allows the range. Otherwise a Proxy pointed the operator's
// Pod at the metadata service, the API server or the Pod's own ports every probe interval.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DEFAULT_EXTERNAL_ENDPOINTS } from '../../providers/endpoint-ranges.js';
import {
  eventually,
  fastHealthCheck,
  managedSpec,
  operatorSuite,
  type OperatorSuite,
} from './operator-fixture.js';

/** A service "inside" on loopback that counts the operator's direct (proxy-less) fetches. */
async function insideService(): Promise<{ server: Server; url: string; direct: () => number }> {
  let direct = 0;
  const server = createServer((req, res) => {
    if (req.headers['user-agent'] === 'proxy-operator-direct-check') direct++;
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/internal-admin`;
  return { server, url, direct: () => direct };
}

const spec = (suite: OperatorSuite, probeURL: string) =>
  managedSpec(suite.target, { healthCheck: { ...fastHealthCheck(suite.target), probeURL } });

/** The direct check runs every probe interval (2 s here): this covers several. */
const SEVERAL_INTERVALS_MS = 5_000;

describe('the direct check of a probe URL, with the default providers config', () => {
  const suite = operatorSuite('direct-refused', {
    settings: { externalEndpoints: DEFAULT_EXTERNAL_ENDPOINTS },
  });
  let inside: Awaited<ReturnType<typeof insideService>>;
  beforeAll(async () => (inside = await insideService()));
  afterAll(() => new Promise((r) => inside.server.close(r)));

  it('never fetches a loopback probe URL from the operator', async () => {
    await suite.api.create('inside', { spec: spec(suite, inside.url) });
    await eventually('the Proxy has an instance', async () =>
      (await suite.api.get('inside')).status?.providerID ? true : undefined,
    );
    await new Promise((r) => setTimeout(r, SEVERAL_INTERVALS_MS));
    expect(inside.direct()).toBe(0);
  }, 60_000);
});

describe('the direct check of a probe URL, loopback allowed', () => {
  const suite = operatorSuite('direct-allowed');
  let inside: Awaited<ReturnType<typeof insideService>>;
  beforeAll(async () => (inside = await insideService()));
  afterAll(() => new Promise((r) => inside.server.close(r)));

  it('fetches it (the control: the check does run, and this test sees it)', async () => {
    await suite.api.create('inside', { spec: spec(suite, inside.url) });
    await eventually('a direct fetch', async () => (inside.direct() > 0 ? true : undefined), 20_000);
  }, 60_000);
});

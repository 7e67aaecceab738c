import { createServer, type Server, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import { condition, eventually, fastHealthCheck, managedSpec, operatorSuite } from './operator-fixture.js';

// docs/security.md's threat model: anyone who may create an External Proxy (and may not read
// Secrets). Such a Proxy whose endpoint is a server of their own and whose credentialsSecretRef
// names the Secret the operator made for a Managed proxy must not have that proxy's username
// and password sent to the server (the probes send a proxy's credentials in
// Proxy-Authorization; leases hand them out): the reference is refused, naming the owner.

let thief: Server;
const seen: string[] = [];
const suite = operatorSuite('borrowed-creds');
const { api, kc, namespace } = suite;
const core = kc.makeApiClient(CoreV1Api);

beforeAll(async () => {
  thief = createServer((req: IncomingMessage, res) => {
    const auth = req.headers['proxy-authorization'];
    if (typeof auth === 'string') seen.push(auth);
    res.writeHead(407, { 'proxy-authenticate': 'Basic realm="x"' }).end();
  });
  await new Promise<void>((resolve) => thief.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  thief?.closeAllConnections();
  await new Promise((resolve) => thief?.close(resolve));
});

it("an External Proxy cannot borrow a Managed proxy's generated credentials", async () => {
  await api.create('victim', { spec: managedSpec(suite.target) });
  const secret = await eventually('victim credentials generated', async () => {
    try {
      return await core.readNamespacedSecret({ namespace, name: 'victim-proxy-credentials' });
    } catch {
      return undefined;
    }
  });
  const victim = `Basic ${Buffer.from(
    `${Buffer.from(secret.data!.username, 'base64').toString()}:${Buffer.from(secret.data!.password, 'base64').toString()}`,
  ).toString('base64')}`;

  await api.create('thief', {
    spec: {
      mode: 'External',
      endpoint: {
        host: '127.0.0.1',
        port: (thief.address() as AddressInfo).port,
        credentialsSecretRef: { name: 'victim-proxy-credentials' },
      },
      attributes: { team: 'x' },
      healthCheck: fastHealthCheck(suite.target),
    },
  });
  const refused = await eventually('the reference refused', async () => {
    const healthy = condition(await api.get('thief'), 'Healthy');
    return healthy?.reason === 'CredentialsUnavailable' ? healthy : undefined;
  });
  expect(refused.message).toContain('belongs to Proxy victim');
  // Several probe intervals (fastHealthCheck: 1 s) after the refusal: nothing was sent.
  await new Promise((r) => setTimeout(r, 5000));
  expect(seen).not.toContain(victim);
}, 120_000);

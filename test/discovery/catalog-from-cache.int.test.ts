// The discovery API follows each Proxy through the operator's cache events (no re-listing):
// a real operator against the real API server, real mock forward proxies on loopback.
import { CoreV1Api } from '@kubernetes/client-node';
import {
  deleteProxy,
  eventually,
  fastHealthCheck,
  managedSpec,
  operatorSuite,
} from '../handlers/operator-fixture.js';

const suite = operatorSuite('discovery');
const { api: proxies, call, kc, namespace } = suite;

const one = (name: string) => call('GET', `/v1/proxies/${namespace}/${name}`);

// This test is about the catalog, not health: one probe timing out on a loaded machine (a CI run
// took us-1 out between its checks) must not take a proxy out of leases.
const patientHealthCheck = () => ({ ...fastHealthCheck(suite.target), failureThreshold: 3 });

describe('the discovery catalog over the cache', () => {
  it('follows a Proxy from creation through spec and status changes to deletion', async () => {
    await proxies.create('eu-1', {
      spec: managedSpec(suite.target, {
        attributes: { geo: 'eu' },
        maxLeases: 2,
        healthCheck: patientHealthCheck(),
      }),
    });
    await proxies.create('us-1', {
      spec: managedSpec(suite.target, { attributes: { geo: 'us' }, healthCheck: patientHealthCheck() }),
    });

    // Listed as soon as the cache has it, leasable once its status says Ready and Healthy.
    await eventually('eu-1 listed', async () => ((await one('eu-1')).status === 200 ? true : undefined));
    const healthy = (name: string) =>
      eventually(`${name} healthy in the API`, async () => {
        const p = await one(name);
        return p.body.healthy === true ? p.body : undefined;
      });
    const ready = await healthy('eu-1');
    await healthy('us-1');
    const status = await proxies.get('eu-1');
    expect(ready).toMatchObject({
      id: `${namespace}/eu-1`,
      ip: status.status?.ip,
      port: 3128,
      phase: 'Ready',
      attributes: { geo: 'eu' },
      maxLeases: 2,
      activeLeases: 0,
    });

    const leased = await call('POST', '/v1/leases', { selector: { geo: 'eu' }, session: 'job-1' });
    expect(leased.status).toBe(201);
    // Managed proxies require the credentials the operator generated into their Secret.
    const secret = await kc
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace, name: 'eu-1-proxy-credentials' });
    const [username, password] = ['username', 'password'].map((k) =>
      Buffer.from(secret.data![k], 'base64').toString('utf8'),
    );
    expect(leased.body).toMatchObject({
      proxy: {
        id: `${namespace}/eu-1`,
        url: `http://${username}:${password}@${status.status?.ip}:3128`,
        username,
        password,
      },
      session: { key: 'job-1', moved: false },
    });
    const leaseID = leased.body.leaseID as string;

    // A spec change reaches the catalog through the update event: the attribute index follows.
    await proxies.patchSpec('eu-1', { attributes: { geo: 'apac' } });
    await eventually('eu-1 re-indexed', async () => {
      const listed = await call('GET', '/v1/proxies?attr.geo=apac');
      return (listed.body.items as { id: string }[]).some((p) => p.id === `${namespace}/eu-1`)
        ? true
        : undefined;
    });
    expect((await call('POST', '/v1/leases', { selector: { geo: 'eu' } })).body).toMatchObject({
      error: 'no_match',
    });
    // The session's proxy no longer matches its selector: it moves, and says so.
    const moved = await call('POST', '/v1/leases', { selector: { geo: 'us' }, session: 'job-1' });
    expect(moved.body).toMatchObject({ proxy: { id: `${namespace}/us-1` }, session: { moved: true } });

    await proxies.patchSpec('eu-1', { maxLeases: 0 });
    await eventually('eu-1 list-only', async () =>
      (await one('eu-1')).body.maxLeases === 0 ? true : undefined,
    );
    expect((await call('POST', '/v1/leases', { selector: { geo: 'apac' } })).body).toMatchObject({
      error: 'no_match',
    });

    // Deleted: gone from the API (from the moment deletion starts), its lease still usable.
    await deleteProxy(kc, namespace, 'eu-1');
    await eventually('eu-1 gone', async () => ((await one('eu-1')).status === 404 ? true : undefined));
    expect((await one('eu-1')).body).toMatchObject({ error: 'proxy_not_found' });
    expect((await call('POST', `/v1/leases/${leaseID}/report`, { result: 'ok' })).status).toBe(200);
    const renewed = await call('POST', `/v1/leases/${leaseID}/renew`);
    expect(renewed.body).toMatchObject({
      proxy: { id: `${namespace}/eu-1`, healthy: false, phase: 'Deleting' },
    });
    expect((await call('DELETE', `/v1/leases/${leaseID}`)).status).toBe(204);
  });
});

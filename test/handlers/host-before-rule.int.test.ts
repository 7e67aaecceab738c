// Issue 12 item 1, defence in depth: an External Proxy stored before the CRD's host rule existed
// (here: created under a CRD without it, then the real CRD applied over it) keeps its host. The
// operator must not probe it — a URL parser reads 127.0.0.0102 as 127.0.0.66, where a real
// forward proxy listens — and discovery must not hand it out. Its own control plane: the shared
// one's CRD must never lose a rule, even for a moment.
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import type { CustomResourceDefinition } from '../../crds/openapi-schema.js';
import { ControlPlane, freePort } from '../../framework/testing/control-plane.js';
import { CONTROL_PLANE_DIR_PREFIX } from '../harness/kube.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import { rejectionOf } from '../crd/api-error.js';
import { installProxyCrd, readDistProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import {
  callDiscovery,
  condition,
  createNamespace,
  eventually,
  fastHealthCheck,
  startOperator,
  type RunningOperator,
} from './operator-fixture.js';

const namespace = 'crawl';
let cp: ControlPlane;
let api: ProxyApi;
let target: LocalTarget;
let misread: ForwardProxy; // where a URL parser would send probes for 127.0.0.0102
let canonical: ForwardProxy;
let op: RunningOperator | undefined;

/** The dist/ CRD without the rule on spec.endpoint.host: the CRD before issue 12. */
function withoutHostRule(crd: CustomResourceDefinition): CustomResourceDefinition {
  const copy = structuredClone(crd);
  const host =
    copy.spec.versions[0].schema!.openAPIV3Schema!.properties!.spec.properties!.endpoint.properties!.host;
  delete host['x-kubernetes-validations'];
  return copy;
}

beforeAll(async () => {
  cp = await ControlPlane.start({ dirPrefix: CONTROL_PLANE_DIR_PREFIX });
  const kc = cp.kubeConfig();
  target = await startLocalTarget();
  misread = await startForwardProxy({ host: '127.0.0.66', port: await freePort() });
  canonical = await startForwardProxy({ host: '127.0.0.67', port: await freePort() });
  await installProxyCrd(kc, 60_000, withoutHostRule(await readDistProxyCrd()));
  await createNamespace(kc, namespace);
  api = new ProxyApi(kc, namespace);
  const external = (host: string, port: number, geo: string) => ({
    spec: {
      mode: 'External',
      endpoint: { host, port },
      attributes: { geo },
      healthCheck: fastHealthCheck(target),
    },
  });
  await api.create('before-rule', external('127.0.0.0102', misread.port, 'before'));
  await api.create('canonical', external('127.0.0.67', canonical.port, 'canonical'));
  // The rule arrives; the stored object is not re-validated.
  await installProxyCrd(kc);
  op = await startOperator(kc, {}, namespace);
}, 120_000);

afterAll(async () => {
  await op?.stop();
  await misread?.close();
  await canonical?.close();
  await target?.close();
  await cp?.stop();
});

const call = (method: 'GET' | 'POST', path: string, body?: unknown) =>
  callDiscovery(op!.discoveryURL, method, path, body);

describe('an External Proxy stored before the host rule', () => {
  it('is refused today: the rule is in place', async () => {
    const message = await rejectionOf(
      api.create(
        'after-rule',
        { spec: { mode: 'External', endpoint: { host: '127.0.0.0102', port: 3128 } } },
        { dryRun: true },
      ),
    );
    expect(message).toContain('spec.endpoint.host');
  });

  it('is never probed, gets Healthy=False/InvalidProbeTarget, and is never handed out', async () => {
    const stored = await eventually('InvalidProbeTarget', async () => {
      const p = await api.get('before-rule');
      return condition(p, 'Healthy')?.reason === 'InvalidProbeTarget' ? p : undefined;
    });
    expect(stored.spec.endpoint?.host).toBe('127.0.0.0102');
    expect(stored.status?.phase).toBe('Unhealthy');
    expect(condition(stored, 'Healthy')).toMatchObject({ status: 'False' });

    // The control: a canonical host, same operator, probed through its proxy and leasable.
    await eventually('canonical healthy in discovery', async () => {
      const p = await call('GET', `/v1/proxies/${namespace}/canonical`);
      return p.body.healthy === true ? p : undefined;
    });
    expect(canonical.stats.connects + canonical.stats.requests).toBeGreaterThan(0);

    expect((await call('GET', `/v1/proxies/${namespace}/before-rule`)).body).toMatchObject({
      ip: '',
      healthy: false,
    });
    expect(await call('POST', '/v1/leases', { selector: { geo: 'before' } })).toMatchObject({
      status: 409,
      body: { error: 'no_match' },
    });
    // Nothing ever reached the address the parser would have made of the host.
    expect(misread.stats).toEqual({ connects: 0, requests: 0, refusedAuth: 0 });
  });
});

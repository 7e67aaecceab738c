// External endpoints inside (issue 44 item 5), on the real control plane with the whole
// operator: an External Proxy whose endpoint is in loopback, the metadata addresses or the
// cluster's CIDRs is never probed (a real forward proxy that counts connections sees none),
// never leased, and says why (Healthy=False reason EndpointRefused naming the range, and an
// Event) unless the providers config allows the range. The tests' other suites allow loopback
// in their own settings (operator-fixture.ts); these start from the product's default.
import { DEFAULT_EXTERNAL_ENDPOINTS } from '../../providers/endpoint-ranges.js';
import { TestForwardProxy } from '../health/forward-proxy.js';
import {
  condition,
  eventsOnceThere,
  eventually,
  fastHealthCheck,
  operatorSuite,
  type OperatorSuite,
} from './operator-fixture.js';

const spec = (suite: OperatorSuite, name: string, host: string, port: number) => ({
  spec: {
    mode: 'External',
    endpoint: { host, port },
    attributes: { case: name },
    healthCheck: fastHealthCheck(suite.target),
  },
});

/** The Proxy once the operator has written its Healthy condition with `reason`. */
async function healthyReason(suite: OperatorSuite, name: string, reason: string) {
  return eventually(`${name} Healthy reason ${reason}`, async () => {
    const p = await suite.api.get(name);
    return condition(p, 'Healthy')?.reason === reason ? p : undefined;
  });
}

/** Probes run every 2 s (fastHealthCheck): this covers several rounds. */
const SEVERAL_PROBE_ROUNDS_MS = 5_000;

describe('with the default providers config', () => {
  const suite = operatorSuite('refused', {
    providers: () => ({}),
    settings: { externalEndpoints: DEFAULT_EXTERNAL_ENDPOINTS },
  });
  let proxy: TestForwardProxy;

  beforeAll(async () => {
    proxy = await TestForwardProxy.start('healthy', '127.0.0.1');
  });
  afterAll(() => proxy.close());

  it('refuses a loopback endpoint: never probed, never leased, the condition and an Event name the range', async () => {
    await suite.api.create('loopback', spec(suite, 'loopback', '127.0.0.1', proxy.port));
    const p = await healthyReason(suite, 'loopback', 'EndpointRefused');
    expect(p.status?.phase).toBe('Unhealthy');
    expect(condition(p, 'Healthy')).toMatchObject({
      status: 'False',
      message: expect.stringContaining('127.0.0.1 is in the loopback range (127.0.0.0/8)'),
    });
    expect(condition(p, 'Healthy')?.message).toContain('external.allowEndpointRanges: [loopback]');
    const events = await eventsOnceThere(suite.kc, suite.namespace, 'loopback', 'EndpointRefused');
    expect(events.find((e) => e.reason === 'EndpointRefused')).toMatchObject({
      type: 'Warning',
      message: expect.stringContaining('loopback range'),
    });
    const lease = await suite.call('POST', '/v1/leases', { selector: { case: 'loopback' } });
    expect(lease.status).toBe(409);
    expect(lease.body).toMatchObject({ error: 'no_match' });
    await new Promise((r) => setTimeout(r, SEVERAL_PROBE_ROUNDS_MS));
    expect(proxy.connections).toBe(0);
  }, 60_000);

  it.each([
    ['the metadata address', 'metadata', '169.254.169.254', 'metadata range (169.254.169.254/32)'],
    ['a metadata name', 'metadata-name', 'metadata.google.internal', 'a name of the metadata range'],
    ['localhost', 'localhost', 'localhost', 'a name of the loopback range'],
    ['an IPv6 link-local address', 'link-local', 'fe80::1', 'link-local range (fe80::/10)'],
    ['the unspecified address', 'unspecified', '0.0.0.0', 'unspecified range (0.0.0.0/8)'],
  ])(
    'refuses %s',
    async (_what, name, host, named) => {
      await suite.api.create(name, spec(suite, name, host, proxy.port));
      const p = await healthyReason(suite, name, 'EndpointRefused');
      expect(condition(p, 'Healthy')?.message).toContain(named);
      expect(proxy.connections).toBe(0);
    },
    60_000,
  );
});

describe('with loopback allowed and 127.0.0.1 in the cluster CIDRs', () => {
  const suite = operatorSuite('allowed', {
    providers: () => ({}),
    settings: {
      externalEndpoints: {
        ...DEFAULT_EXTERNAL_ENDPOINTS,
        allowRanges: ['loopback'],
        clusterCIDRs: ['127.0.0.1/32'],
      },
    },
  });
  let inside: TestForwardProxy;
  let allowed: TestForwardProxy;

  beforeAll(async () => {
    inside = await TestForwardProxy.start('healthy', '127.0.0.1');
    allowed = await TestForwardProxy.start('healthy', '127.0.0.2');
  });
  afterAll(() => Promise.all([inside.close(), allowed.close()]));

  it('probes and leases a loopback endpoint the config allows', async () => {
    await suite.api.create('allowed', spec(suite, 'allowed', '127.0.0.2', allowed.port));
    const p = await healthyReason(suite, 'allowed', 'ProbeSucceeded');
    expect(p.status?.phase).toBe('Ready');
    expect(allowed.connections).toBeGreaterThan(0);
    const lease = await eventually('a lease of the allowed proxy', async () => {
      const r = await suite.call('POST', '/v1/leases', { selector: { case: 'allowed' } });
      return r.status === 201 ? r : undefined;
    });
    expect(lease.body).toMatchObject({ proxy: { id: `${suite.namespace}/allowed` } });
  }, 60_000);

  it('checks what a name resolves to before connecting: localhost is 127.0.0.1, in the cluster range, and is never connected to', async () => {
    // The name passes (loopback names are allowed); its address is refused at connect time.
    await suite.api.create('by-name', spec(suite, 'by-name', 'localhost', inside.port));
    const p = await healthyReason(suite, 'by-name', 'EndpointRefused');
    expect(condition(p, 'Healthy')?.message).toMatch(
      /endpoint refused: localhost resolves to 127\.0\.0\.1: 127\.0\.0\.1 is in the cluster range \(127\.0\.0\.1\/32\)/,
    );
    expect(p.status?.phase).toBe('Unhealthy');
    const lease = await suite.call('POST', '/v1/leases', { selector: { case: 'by-name' } });
    expect(lease.status).toBe(409);
    await new Promise((r) => setTimeout(r, SEVERAL_PROBE_ROUNDS_MS));
    expect(inside.connections).toBe(0);
  }, 60_000);

  it('refuses the literal cluster address before probing', async () => {
    await suite.api.create('cluster', spec(suite, 'cluster', '127.0.0.1', inside.port));
    const p = await healthyReason(suite, 'cluster', 'EndpointRefused');
    expect(condition(p, 'Healthy')?.message).toContain('127.0.0.1 is in the cluster range (127.0.0.1/32)');
    expect(inside.connections).toBe(0);
  }, 60_000);
});

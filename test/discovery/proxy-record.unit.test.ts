// How a Proxy resource reads in the discovery API: address, health and lease cap.
import type { Proxy } from '../../crds/proxy-types.js';
import { toRecord } from '../../handlers/proxy-catalog.js';

function proxyResource(overrides: { spec?: Partial<Proxy['spec']>; status?: Proxy['status'] } = {}): Proxy {
  return {
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: { namespace: 'crawl', name: 'p1' },
    spec: {
      mode: 'Managed',
      provider: 'mock',
      port: 3128,
      maxLeases: 5,
      attributes: { geo: 'eu' },
      ...overrides.spec,
    },
    status: overrides.status,
  } as Proxy;
}

const healthy = (status: 'True' | 'False' | 'Unknown', reason = 'x') => [
  { type: 'Healthy', status, reason, message: 'x', lastTransitionTime: '2026-01-01T00:00:00Z' },
];

describe('a Proxy resource as a discovery record', () => {
  it.each<[string, Parameters<typeof proxyResource>[0], Partial<ReturnType<typeof toRecord>>]>([
    [
      'a new Managed proxy: no address, Pending, not healthy',
      {},
      { ip: '', phase: 'Pending', healthy: false },
    ],
    [
      'a Ready Managed proxy: status.ip and spec.port; not guarded',
      { status: { phase: 'Ready', ip: '10.1.2.3', latencyMillis: 42, conditions: healthy('True') } },
      { ip: '10.1.2.3', port: 3128, phase: 'Ready', healthy: true, latencyMillis: 42 },
    ],
    [
      'Healthy=True but not Ready (e.g. Deleting): not healthy',
      { status: { phase: 'Deleting', ip: '10.1.2.3', conditions: healthy('True') } },
      { phase: 'Deleting', healthy: false },
    ],
    [
      'Ready but Healthy=False: not healthy',
      { status: { phase: 'Ready', ip: '10.1.2.3', conditions: healthy('False') } },
      { healthy: false },
    ],
    [
      "Unhealthy: the Healthy condition's reason is the health reason",
      { status: { phase: 'Unhealthy', ip: '10.1.2.3', conditions: healthy('False', 'ProxyTimeout') } },
      { healthy: false, healthReason: 'ProxyTimeout' },
    ],
    [
      'an External proxy: its endpoint, guarded (the gateway checks its address before connecting)',
      {
        spec: { mode: 'External', provider: undefined, endpoint: { host: 'proxy.example.net', port: 8080 } },
        status: { phase: 'Ready', conditions: healthy('True') },
      },
      { ip: 'proxy.example.net', port: 8080, healthy: true, guarded: true },
    ],
    // Issue 12 item 1: stored before the CRD's host rule, or reported by a provider.
    [
      'an External proxy at a host a URL parser reads as another address: no address, not healthy',
      {
        spec: { mode: 'External', provider: undefined, endpoint: { host: '127.0.0.010', port: 8080 } },
        status: { phase: 'Ready', conditions: healthy('True') },
      },
      { ip: '', healthy: false, guarded: true },
    ],
    [
      'a Managed proxy whose provider reported a non-canonical IP: no address, not healthy',
      { status: { phase: 'Ready', ip: '0x7f.0.0.1', conditions: healthy('True') } },
      { ip: '', healthy: false },
    ],
  ])('%s', (_case, resource, expected) => {
    const record = toRecord(proxyResource(resource));
    // Only an External proxy is guarded: a Managed one's address is the provider's.
    expect(record.guarded === true).toBe(expected.guarded === true);
    expect(record).toMatchObject({
      id: 'crawl/p1',
      attributes: { geo: 'eu' },
      maxLeases: 5,
      ...expected,
    });
  });
});

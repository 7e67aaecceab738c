// Issue 12 item 1, defence in depth: an address a URL parser reads as another one reaches the
// operator by a path the CRD's host rule never sees — here a provider reporting it (status.ip);
// an External Proxy stored before the rule is the same case (both go through the same check).
// The real operator must neither probe it (a WHATWG parser reads 127.0.0.012 as 127.0.0.10, where
// a real forward proxy answers, so a probe would succeed) nor hand the raw string to crawlers.
import type { Instance } from '../../providers/contract.js';
import { condition, eventsOnceThere, eventually, managedSpec, operatorSuite } from './operator-fixture.js';
import { DelegatingProvider } from './delegating-provider.js';

/** The mock, reporting its canonical IPv4 addresses with the last octet in octal: 127.0.0.10 → 127.0.0.012. */
class OctalAddresses extends DelegatingProvider {
  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    const instance = await this.inner.get(id, signal);
    if (!instance.ip) return instance;
    const octets = instance.ip.split('.');
    octets[3] = `0${Number(octets[3]).toString(8)}`;
    return { ...instance, ip: octets.join('.') };
  }
}

const suite = operatorSuite('misread-host', {
  providers: (mock) => ({ mock, octal: new OctalAddresses(mock) }),
});
const { api, call, kc, namespace } = suite;

describe('a proxy whose address is not written as one address', () => {
  it('is Healthy=False/InvalidProbeTarget, never probed healthy, listed without an address and never leased', async () => {
    await api.create('canonical', { spec: managedSpec(suite.target, { attributes: { geo: 'both' } }) });
    await api.create('octal', {
      spec: managedSpec(suite.target, { provider: 'octal', attributes: { geo: 'octal' } }),
    });

    const octal = await eventually('octal InvalidProbeTarget', async () => {
      const p = await api.get('octal');
      return condition(p, 'Healthy')?.reason === 'InvalidProbeTarget' ? p : undefined;
    });
    expect(octal.status?.ip).toMatch(/^127\.0\.0\.0[0-7]+$/);
    expect(octal.status?.phase).toBe('Unhealthy');
    expect(condition(octal, 'Healthy')).toMatchObject({ status: 'False' });
    expect(condition(octal, 'Healthy')?.message).toContain(
      `the proxy host "${octal.status?.ip}" is not an IPv4 address in dotted decimal without leading zeros`,
    );

    // The control: the same mock's canonical address is probed and leased as usual.
    await eventually('canonical leasable', async () => {
      const p = await call('GET', `/v1/proxies/${namespace}/canonical`);
      return p.body.healthy === true ? p : undefined;
    });

    expect((await call('GET', `/v1/proxies/${namespace}/octal`)).body).toMatchObject({
      ip: '',
      healthy: false,
      phase: 'Unhealthy',
    });
    expect(await call('POST', '/v1/leases', { selector: { geo: 'octal' } })).toMatchObject({
      status: 409,
      body: { error: 'no_match' },
    });
    const listed = (await call('GET', '/v1/proxies')).body.items as Array<{ ip: string }>;
    expect(listed.map((p) => p.ip)).not.toContain(octal.status?.ip);

    // It stays that way: no verdict from a probe of the address the parser made of it.
    await new Promise((r) => setTimeout(r, 3_000));
    const later = await api.get('octal');
    expect(condition(later, 'Healthy')?.reason).toBe('InvalidProbeTarget');
    const events = (await eventsOnceThere(kc, namespace, 'octal', 'InvalidProbeTarget')).filter(
      (e) => e.reason === 'InvalidProbeTarget',
    );
    expect(events).toHaveLength(1);
  });
});

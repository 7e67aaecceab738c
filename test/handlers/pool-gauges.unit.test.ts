import { attributeSetLabel, poolCounts, provisioningAges } from '../../handlers/pool-gauges.js';
import type { Proxy, ProxyPhase } from '../../crds/proxy-types.js';

function proxy(
  name: string,
  opts: {
    namespace?: string;
    attributes?: Record<string, string>;
    phase?: ProxyPhase;
    created?: string;
    provisioned?: { status: 'True' | 'False'; since: string };
    deleting?: boolean;
  } = {},
): Proxy {
  return {
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: {
      name,
      namespace: opts.namespace ?? 'crawl',
      creationTimestamp: opts.created ?? '2026-01-01T00:00:00Z',
      ...(opts.deleting ? { deletionTimestamp: '2026-01-01T00:30:00Z' } : {}),
    },
    spec: { mode: 'External', attributes: opts.attributes } as Proxy['spec'],
    status: {
      phase: opts.phase,
      conditions: opts.provisioned
        ? [
            {
              type: 'Provisioned',
              status: opts.provisioned.status,
              reason: 'r',
              message: '',
              lastTransitionTime: opts.provisioned.since,
            },
          ]
        : [],
    },
  };
}

describe('attributeSetLabel: one label value per attribute set', () => {
  it.each<[Record<string, string> | undefined, string]>([
    [undefined, ''],
    [{}, ''],
    [{ geo: 'eu' }, 'geo=eu'],
    [{ purpose: 'crawl', geo: 'eu' }, 'geo=eu,purpose=crawl'],
    [{ geo: 'eu', purpose: 'crawl' }, 'geo=eu,purpose=crawl'],
  ])('%j → %j', (attributes, label) => {
    expect(attributeSetLabel(attributes)).toBe(label);
  });
});

describe('poolCounts: proxies per namespace, attribute set and phase', () => {
  it('counts each pool, and lists every phase of a pool that exists (zeros included)', () => {
    const counts = poolCounts([
      proxy('a', { attributes: { geo: 'eu' }, phase: 'Ready' }),
      proxy('b', { attributes: { geo: 'eu' }, phase: 'Unhealthy' }),
      proxy('c', { attributes: { geo: 'eu' }, phase: 'Ready' }),
      proxy('d', { attributes: { geo: 'us' }, phase: 'Unhealthy' }),
      proxy('e', { namespace: 'other', attributes: { geo: 'eu' } }),
    ]);
    const of = (namespace: string, attributes: string) =>
      Object.fromEntries(
        counts
          .filter((c) => c.namespace === namespace && c.attributes === attributes)
          .map((c) => [c.phase, c.count]),
      );
    expect(of('crawl', 'geo=eu')).toEqual({
      Pending: 0,
      Provisioning: 0,
      Ready: 2,
      Unhealthy: 1,
      Deleting: 0,
      Failed: 0,
    });
    // A pool that is all down reads Ready=0, not "no data": the too-few-healthy alert needs the 0.
    expect(of('crawl', 'geo=us')).toMatchObject({ Ready: 0, Unhealthy: 1 });
    // No phase yet counts as Pending, as proxy_operator_proxies does.
    expect(of('other', 'geo=eu')).toMatchObject({ Pending: 1, Ready: 0 });
    expect(counts).toHaveLength(3 * 6);
  });

  it('no proxies, no pools', () => {
    expect(poolCounts([])).toEqual([]);
  });
});

describe('provisioningAges: how long each proxy has been on its way to serving', () => {
  const now = new Date('2026-01-01T01:00:00Z');
  it.each<[string, Parameters<typeof proxy>[1], number | undefined]>([
    ['Pending, no condition: since creation', { phase: 'Pending' }, 3600],
    ['no phase yet counts as Pending', {}, 3600],
    [
      'Provisioning: since Provisioned turned False',
      { phase: 'Provisioning', provisioned: { status: 'False', since: '2026-01-01T00:50:00Z' } },
      600,
    ],
    [
      'Provisioning with Provisioned=True (a stale condition): since creation',
      { phase: 'Provisioning', provisioned: { status: 'True', since: '2026-01-01T00:50:00Z' } },
      3600,
    ],
    ['Ready: not provisioning, no series', { phase: 'Ready' }, undefined],
    ['Unhealthy: not provisioning', { phase: 'Unhealthy' }, undefined],
    ['Failed: not provisioning (its own condition says why)', { phase: 'Failed' }, undefined],
    ['being deleted: not provisioning', { phase: 'Provisioning', deleting: true }, undefined],
    [
      'a clock ahead of creation reads 0, not negative',
      { phase: 'Pending', created: '2026-01-01T02:00:00Z' },
      0,
    ],
  ])('%s', (_what, opts, seconds) => {
    const ages = provisioningAges([proxy('p', opts)], now);
    if (seconds === undefined) expect(ages).toEqual([]);
    else expect(ages).toEqual([{ namespace: 'crawl', proxy: 'crawl/p', seconds }]);
  });
});

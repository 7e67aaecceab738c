import type { CacheReader, KubeObject } from '../../framework/index.js';
import type { Proxy, ProxyPhase } from '../../crds/proxy-types.js';
import {
  capFor,
  countedFor,
  holdsSlot,
  outOfService,
  ReplacementBudget,
  type MaxUnavailable,
  type SlotKind,
} from '../../handlers/replacement-budget.js';
import type { ReplacementStatus } from '../../crds/proxy-types.js';
import { repairHold, sharesFor } from '../../handlers/repair-hold.js';

const setting = (
  def: MaxUnavailable['default'],
  byProvider: MaxUnavailable['byProvider'] = {},
): MaxUnavailable => ({
  default: def,
  byProvider,
});

describe("the cap on a provider's proxies out of service", () => {
  it.each([
    ['a count is taken as is', setting({ kind: 'count', value: 3 }), 'mock', 100, 3],
    ['25% of 10 rounds down to 2', setting({ kind: 'percent', value: 25 }), 'mock', 10, 2],
    ['25% of 3 is still 1', setting({ kind: 'percent', value: 25 }), 'mock', 3, 1],
    ['100% of 7 is 7', setting({ kind: 'percent', value: 100 }), 'mock', 7, 7],
    [
      'a provider override wins',
      setting({ kind: 'count', value: 1 }, { gcp: { kind: 'percent', value: 50 } }),
      'gcp',
      10,
      5,
    ],
  ])('%s', (_n, s, provider, total, want) => {
    expect(capFor(s, provider, total)).toBe(want);
  });
});

/** Proxies as [name, provider, phase, probe URL (default: one for all)]. */
function fakeCache(proxies: Array<[string, string, ProxyPhase, string?]>): CacheReader & { lists: number } {
  const objects = proxies.map(
    ([name, provider, phase, probeURL = 'https://target.example/generate_204']) =>
      ({
        apiVersion: 'crawl.example.com/v1alpha1',
        kind: 'Proxy',
        metadata: { name, namespace: 'ns' },
        spec: { mode: 'Managed', provider, healthCheck: { probeURL } },
        status: { phase },
      }) as unknown as Proxy,
  );
  const cache = {
    lists: 0,
    get: () => undefined,
    onChange: () => () => {},
    list<T extends KubeObject>(): T[] {
      cache.lists++;
      return structuredClone(objects) as unknown as T[];
    },
  };
  return cache;
}

describe('replacement slots', () => {
  const fleet = (phases: ProxyPhase[]) => fakeCache(phases.map((p, i) => [`p${i}`, 'mock', p]));

  it.each([
    ['none out of service', ['Ready', 'Ready', 'Ready', 'Ready'], true, 0],
    ['one Provisioning, cap 2', ['Provisioning', 'Ready', 'Ready', 'Ready'], true, 1],
    [
      'two out of service (Provisioning, Unhealthy), cap 2',
      ['Provisioning', 'Unhealthy', 'Ready', 'Ready'],
      false,
      2,
    ],
    ['Pending and Failed never served, so do not count', ['Pending', 'Failed', 'Ready', 'Ready'], true, 0],
  ] as const)('%s → granted %s', (_n, phases, granted, inFlight) => {
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 2 }));
    expect(budget.tryAcquire('ns/p3', 'mock', fleet([...phases]))).toEqual({
      granted,
      inFlight,
      cap: 2,
      failed: [],
    });
  });

  it('counts its own grants before the cache shows them, and frees a slot on release', () => {
    let now = 0;
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 2 }), () => now);
    const cache = fleet(['Ready', 'Ready', 'Ready', 'Ready']);
    expect(budget.tryAcquire('ns/p0', 'mock', cache).granted).toBe(true);
    expect(budget.tryAcquire('ns/p1', 'mock', cache).granted).toBe(true);
    expect(budget.tryAcquire('ns/p2', 'mock', cache)).toEqual({
      granted: false,
      inFlight: 2,
      cap: 2,
      failed: [],
    });
    // Asking again for a held slot is idempotent.
    expect(budget.tryAcquire('ns/p0', 'mock', cache).granted).toBe(true);
    budget.release('ns/p0');
    expect(budget.tryAcquire('ns/p2', 'mock', cache).granted).toBe(true);
    // The cache is read at most once a second.
    expect(cache.lists).toBe(1);
    now = 1500;
    budget.tryAcquire('ns/p3', 'mock', cache);
    expect(cache.lists).toBe(2);
  });

  it('keeps providers apart', () => {
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 1 }));
    const cache = fakeCache([
      ['a', 'mock', 'Provisioning'],
      ['b', 'gcp', 'Ready'],
      ['c', 'gcp', 'Ready'],
    ]);
    expect(budget.tryAcquire('ns/b', 'gcp', cache).granted).toBe(true);
    expect(budget.tryAcquire('ns/x', 'mock', cache).granted).toBe(false);
  });
});

describe("the repair hold's counts: the provider's proxies and Unhealthy ones per probe URL", () => {
  it('counts Unhealthy as the budget does, per probe URL, one provider only, from the same tally', () => {
    const A = 'https://a.example/generate_204';
    const B = 'https://b.example/generate_204';
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 1 }), () => 0);
    const cache = fakeCache([
      ['a0', 'mock', 'Unhealthy', A],
      ['a1', 'mock', 'Unhealthy', A],
      ['a2', 'mock', 'Ready', A],
      ['b0', 'mock', 'Provisioning', B],
      ['b1', 'mock', 'Ready', B],
      ['g0', 'gcp', 'Unhealthy', B],
    ]);
    expect(budget.unhealthyByProbeURL('mock', cache)).toEqual([
      { probeURL: A, namespace: 'ns', unhealthy: 2, total: 3 },
      // b0 is Provisioning: no probed instance, not in the shares (judgedByProbes).
      { probeURL: B, namespace: 'ns', unhealthy: 0, total: 1 },
    ]);
    budget.tryAcquire('ns/a0', 'mock', cache);
    expect(cache.lists).toBe(1);
  });
});

describe('whether a status write still holds the slot (the controller releases its grant when not)', () => {
  const rotation: ReplacementStatus = { cause: 'Rotation', startedAt: '2026-03-01T12:00:00Z' };
  const specChanged: ReplacementStatus = { cause: 'SpecChanged', startedAt: '2026-03-01T12:00:00Z' };
  it.each<[string, ReplacementStatus | undefined, Parameters<typeof holdsSlot>[1], boolean]>([
    ['between instances', specChanged, { phase: 'Provisioning' }, true],
    ['a drain starting', undefined, { phase: 'Ready', replacement: rotation }, true],
    // The bug the chaos test with rotation found: a drain's later runs write no record.
    ['a drain going on: the stored record stays', rotation, { phase: 'Ready' }, true],
    ['a drain going on while Unhealthy', rotation, { phase: 'Unhealthy' }, true],
    ['the new instance Ready: the record cleared', rotation, { phase: 'Ready', replacement: null }, false],
    ['Ready with no replacement', undefined, { phase: 'Ready' }, false],
    ['a replacement of another cause once Ready', specChanged, { phase: 'Ready' }, false],
    ['a failed replacement (the cache counts it from status)', specChanged, { phase: 'Failed' }, false],
    ['a drain record on a Failed proxy', rotation, { phase: 'Failed' }, false],
  ])('%s → %s', (_n, stored, written, want) => {
    expect(holdsSlot(stored, written)).toBe(want);
  });
});

// One team's site down (it fails when the operator checks it directly) turned its proxies
// Unhealthy; a rollout slot counted them as out of service, so every other team's rollout and
// rotation on the provider waited for as long as the site was down. A failure its own target
// explains says nothing of a rollout (as the repair hold rules): only the rollout's count leaves
// it out, and never a replacement not yet seen to work.
describe('what each slot kind counts, failures explained by their own target left out of a rollout', () => {
  const oos = outOfService([
    { key: 'ns/in-flight', phase: 'Provisioning', replacing: true },
    { key: 'ns/sick', phase: 'Unhealthy', replacing: false },
    { key: 'ns/explained', phase: 'Unhealthy', replacing: false },
    { key: 'ns/explained-new', phase: 'Unhealthy', replacing: true },
    { key: 'ns/ready', phase: 'Ready', replacing: false },
  ]);
  const explained = new Set(['ns/explained', 'ns/explained-new']);
  it.each<[string, SlotKind, ReadonlySet<string>, string[]]>([
    [
      'rollout, nothing explained: everything out of service',
      'rollout',
      new Set(),
      ['ns/explained', 'ns/explained-new', 'ns/in-flight', 'ns/sick'],
    ],
    [
      'rollout: an Unhealthy proxy whose target fails directly is left out; its unverified replacement is not',
      'rollout',
      explained,
      ['ns/explained-new', 'ns/in-flight', 'ns/sick'],
    ],
    ['repair: replacements in flight only, as before', 'repair', explained, ['ns/in-flight']],
    [
      'held-rollout: in flight and unverified, as before',
      'held-rollout',
      explained,
      ['ns/explained-new', 'ns/in-flight'],
    ],
  ])('%s', (_n, kind, why, want) => {
    expect([...countedFor(kind, oos, [], 'ns/asking', why)].sort()).toEqual(want);
  });

  it("one team's 3 proxies Unhealthy under their down site do not take another team's rollout slots (cap 2)", () => {
    const DOWN = 'https://a.example/generate_204';
    const UP = 'https://b.example/generate_204';
    const cache = fakeCache([
      ['a0', 'mock', 'Unhealthy', DOWN],
      ['a1', 'mock', 'Unhealthy', DOWN],
      ['a2', 'mock', 'Unhealthy', DOWN],
      ['b0', 'mock', 'Ready', UP],
      ['b1', 'mock', 'Ready', UP],
      ['b2', 'mock', 'Ready', UP],
    ]);
    const fails = (url: string) => url === DOWN;
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 2 }), () => 0);
    expect(budget.tryAcquire('ns/b0', 'mock', cache, 'rollout', fails)).toMatchObject({
      granted: true,
      inFlight: 0,
    });
    expect(budget.tryAcquire('ns/b1', 'mock', cache, 'rollout', fails)).toMatchObject({
      granted: true,
      inFlight: 1,
    });
    // Still the cap: B's third waits behind B's own two.
    expect(budget.tryAcquire('ns/b2', 'mock', cache, 'rollout', fails)).toMatchObject({
      granted: false,
      inFlight: 2,
    });
    // With the site answering directly, A's Unhealthy proxies count, as before.
    const other = new ReplacementBudget(setting({ kind: 'count', value: 2 }), () => 0);
    expect(other.tryAcquire('ns/b0', 'mock', cache, 'rollout', () => false).granted).toBe(false);
  });
});

// One team's bad image fails its replacements for good; each holds a slot so the bad spec stops
// after the cap. Counted for every namespace, they blocked every other team's rollouts and
// repairs on the provider (ReplacementBlocked, naming proxies the other team cannot see or fix)
// until the first team acted. A failed replacement holds no instance: it counts against its
// own namespace only, and only its own namespace is told its name. The same for another
// team's Unhealthy proxies in a rollout (a site refusing that team's proxies froze the others'
// rollouts): only its unverified replacements, a rollout's outcome, count for everyone.
describe("a failed replacement or an Unhealthy proxy holds slots of its own namespace's only", () => {
  const oos = outOfService([
    { key: 'a/failed-0', phase: 'Failed', replacing: true },
    { key: 'a/failed-1', phase: 'Failed', replacing: true },
    { key: 'a/in-flight', phase: 'Provisioning', replacing: true },
    { key: 'a/unverified', phase: 'Unhealthy', replacing: true },
    { key: 'a/refused', phase: 'Unhealthy', replacing: false },
    { key: 'b/sick', phase: 'Unhealthy', replacing: false },
    { key: 'b/ready', phase: 'Ready', replacing: false },
  ]);
  it.each<[string, SlotKind, string, string[]]>([
    [
      "a's rollout: a's failures, in flight, unverified and Unhealthy; not b's Unhealthy",
      'rollout',
      'a/asking',
      ['a/failed-0', 'a/failed-1', 'a/in-flight', 'a/refused', 'a/unverified'],
    ],
    [
      "b's rollout: in flight, a's unverified and b's Unhealthy; not a's failures nor a's Unhealthy",
      'rollout',
      'b/asking',
      ['a/in-flight', 'a/unverified', 'b/sick'],
    ],
    [
      "a's repair: a's failures and in-flight",
      'repair',
      'a/asking',
      ['a/failed-0', 'a/failed-1', 'a/in-flight'],
    ],
    ["b's repair: in flight only", 'repair', 'b/asking', ['a/in-flight']],
    [
      "b's held rollout: in flight and unverified",
      'held-rollout',
      'b/asking',
      ['a/in-flight', 'a/unverified'],
    ],
  ])('%s', (_n, kind, key, want) => {
    expect([...countedFor(kind, oos, [], key)].sort()).toEqual(want);
  });

  it("cap 2: a's 2 failures block a's third, not b's rollout, and b is never told their names", () => {
    const cache = twoTeams([
      ['a', 'a0', 'Failed', true],
      ['a', 'a1', 'Failed', true],
      ['a', 'a2', 'Ready', false],
      ['b', 'b0', 'Ready', false],
      ['b', 'b1', 'Ready', false],
    ]);
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 2 }), () => 0);
    expect(budget.tryAcquire('a/a2', 'mock', cache)).toEqual({
      granted: false,
      inFlight: 2,
      cap: 2,
      failed: ['a/a0', 'a/a1'],
    });
    expect(budget.tryAcquire('b/b0', 'mock', cache)).toEqual({
      granted: true,
      inFlight: 0,
      cap: 2,
      failed: [],
    });
    expect(budget.tryAcquire('b/b1', 'mock', cache)).toEqual({
      granted: true,
      inFlight: 1,
      cap: 2,
      failed: [],
    });
  });
});

/** Proxies of several namespaces as [namespace, name, phase, a replacement record]. */
function twoTeams(proxies: Array<[string, string, ProxyPhase, boolean]>): CacheReader {
  const objects = proxies.map(
    ([namespace, name, phase, replacing]) =>
      ({
        apiVersion: 'crawl.example.com/v1alpha1',
        kind: 'Proxy',
        metadata: { name, namespace },
        spec: { mode: 'Managed', provider: 'mock', healthCheck: { probeURL: 'https://t.example/' } },
        status: {
          phase,
          ...(replacing ? { replacement: { cause: 'SpecChanged', startedAt: '2026-01-01T00:00:00Z' } } : {}),
        },
      }) as unknown as Proxy,
  );
  return {
    get: () => undefined,
    onChange: () => () => {},
    list<T extends KubeObject>(): T[] {
      return structuredClone(objects) as unknown as T[];
    },
  };
}

// The repair hold's shares are of the proxies the probes judge (Ready or Unhealthy). A proxy
// without a probed instance (Pending: never created, e.g. a team's mass of proxies whose
// cloud-init is missing; Provisioning: creates refused in an outage; Failed) says nothing of the
// provider's network, but it counted in the totals: one team's 100 Pending proxies let a
// provider outage that turned all 20 serving proxies Unhealthy go as "17 %", and every repair
// went ahead.
describe("the repair hold's shares count only proxies the probes judge", () => {
  it.each<[ProxyPhase, boolean]>([
    ['Ready', true],
    ['Unhealthy', true],
    ['Pending', false],
    ['Provisioning', false],
    ['Failed', false],
    ['Deleting', false],
  ])('%s: counted %s', (phase, counted) => {
    const budget = new ReplacementBudget(setting({ kind: 'count', value: 1 }), () => 0);
    const total = budget.unhealthyByProbeURL('mock', fakeCache([['p', 'mock', phase]]))[0]?.total ?? 0;
    expect(total).toBe(counted ? 1 : 0);
  });

  it("another team's 100 Pending proxies do not dilute a provider outage into repairs", () => {
    const URL = 'https://target.example/generate_204';
    const cache = fakeCache([
      ...Array.from({ length: 20 }, (_, i): [string, string, ProxyPhase, string] => [
        `s${i}`,
        'mock',
        'Unhealthy',
        URL,
      ]),
      ...Array.from({ length: 100 }, (_, i): [string, string, ProxyPhase, string] => [
        `n${i}`,
        'mock',
        'Pending',
        URL,
      ]),
    ]);
    const budget = new ReplacementBudget(setting({ kind: 'percent', value: 25 }), () => 0);
    const shares = sharesFor(
      budget.unhealthyByProbeURL('mock', cache),
      URL,
      () => ({ kind: 'reachable' }),
      'ns',
    );
    expect(shares.fleet).toEqual({ unhealthy: 20, total: 20 });
    expect(
      repairHold({
        provider: 'mock',
        namespace: 'ns',
        probeURL: URL,
        target: { kind: 'reachable' },
        ...shares,
        maxUnhealthyPercent: 20,
      }),
    ).toMatchObject({ kind: 'hold', reason: 'FleetUnhealthy' });
  });
});

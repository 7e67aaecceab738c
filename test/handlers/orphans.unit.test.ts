import {
  explainOrphan,
  findOrphans,
  sweepVerdict,
  wantedBy,
  type SweepScope,
  type SweepVerdict,
  type Wanted,
} from '../../handlers/orphans.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';

const NOW = new Date('2026-01-01T12:00:00Z');
const MIN_AGE = 600;
const ALL: SweepScope = { owner: 'prod' };
const TEAM_A: SweepScope = { owner: 'prod', namespace: 'team-a' };

function inst(
  id: string,
  uid: string,
  revision: string,
  more: { age?: number; owner?: string; namespace?: string } = {},
): Instance {
  return {
    id,
    uid,
    revision,
    ip: '',
    state: 'Running',
    owner: more.owner ?? 'prod',
    namespace: more.namespace ?? 'team-a',
    createdAt: new Date(NOW.getTime() - (more.age ?? MIN_AGE + 1) * 1000),
  };
}

const live = new Map<string, Wanted>([
  ['u-1', { providerID: 'i-new', revision: 'h2' }],
  ['u-2', { providerID: undefined, revision: 'h5' }],
]);

const collect = (reason: 'ProxyGone' | 'StaleRevision'): SweepVerdict => ({ collect: true, reason });
const spare = (reason: Extract<SweepVerdict, { collect: false }>['reason']): SweepVerdict => ({
  collect: false,
  reason,
});

describe('the orphan sweep collects only what this operator owns and no live Proxy wants', () => {
  it.each<[string, Instance, SweepScope, SweepVerdict]>([
    ['the recorded instance of a live Proxy', inst('i-new', 'u-1', 'h2'), ALL, spare('Wanted')],
    [
      'an instance of the revision a live Proxy is creating (not yet recorded)',
      inst('i-5', 'u-2', 'h5'),
      ALL,
      spare('Wanted'),
    ],
    [
      'a stale revision of a live Proxy (an interrupted create, then a spec change)',
      inst('i-old', 'u-1', 'h1'),
      ALL,
      collect('StaleRevision'),
    ],
    [
      'an unrevisioned instance of a live Proxy (it cannot be told apart)',
      inst('i-legacy', 'u-1', ''),
      ALL,
      spare('Unrevisioned'),
    ],
    ['an instance whose Proxy is gone', inst('i-x', 'u-gone', 'h1'), ALL, collect('ProxyGone')],
    [
      'a young instance whose Proxy is gone (a create in flight)',
      inst('i-y', 'u-gone', 'h1', { age: 30 }),
      ALL,
      spare('TooYoung'),
    ],
    ['a young stale revision', inst('i-z', 'u-1', 'h1', { age: 30 }), ALL, spare('TooYoung')],
    [
      "another operator's instance whose Proxy this cache does not know",
      inst('i-s', 'u-gone', 'h1', { owner: 'staging' }),
      ALL,
      spare('OtherOwner'),
    ],
    [
      'an instance made before the owner label existed (owner empty)',
      inst('i-old-style', 'u-gone', 'h1', { owner: '' }),
      ALL,
      spare('OtherOwner'),
    ],
    [
      'an own orphan in the watched namespace',
      inst('i-a', 'u-gone', 'h1', { namespace: 'team-a' }),
      TEAM_A,
      collect('ProxyGone'),
    ],
    [
      'an own instance of a namespace this operator does not watch',
      inst('i-b', 'u-gone', 'h1', { namespace: 'team-b' }),
      TEAM_A,
      spare('UnwatchedNamespace'),
    ],
    [
      'an own instance without a namespace label, under --watch-namespace',
      inst('i-c', 'u-gone', 'h1', { namespace: '' }),
      TEAM_A,
      spare('UnwatchedNamespace'),
    ],
    [
      'an own orphan of any namespace when every namespace is watched',
      inst('i-d', 'u-gone', 'h1', { namespace: 'team-b' }),
      ALL,
      collect('ProxyGone'),
    ],
  ])('%s', (_n, instance, scope, verdict) => {
    expect(sweepVerdict(instance, live, scope, NOW, MIN_AGE)).toEqual(verdict);
    expect(findOrphans([instance], live, scope, NOW, MIN_AGE)).toEqual(
      verdict.collect ? [{ instance, reason: verdict.reason }] : [],
    );
  });

  it.each([
    ['ProxyGone', /no live Proxy/],
    ['StaleRevision', /stale revision of a live Proxy/],
  ] as const)('says why for %s', (reason, why) => {
    expect(explainOrphan(reason)).toMatch(why);
  });

  it('reads what each Proxy wants from its status and its spec-hash annotation', () => {
    const p = {
      metadata: { name: 'p', uid: 'u-1', annotations: { [SPEC_HASH_ANNOTATION]: 'h2' } },
      status: { providerID: 'i-new' },
    } as unknown as Proxy;
    expect(wantedBy([p])).toEqual(new Map([['u-1', { providerID: 'i-new', revision: 'h2' }]]));
  });
});

import { findOrphans, orphanReason, wantedBy, type Wanted } from '../../handlers/orphans.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';

const NOW = new Date('2026-01-01T12:00:00Z');
const MIN_AGE = 600;

function inst(id: string, uid: string, revision: string, ageSeconds = MIN_AGE + 1): Instance {
  return {
    id,
    uid,
    revision,
    ip: '',
    state: 'Running',
    owner: 'o',
    namespace: 'ns',
    createdAt: new Date(NOW.getTime() - ageSeconds * 1000),
  };
}

const live = new Map<string, Wanted>([
  ['u-1', { providerID: 'i-new', revision: 'h2' }],
  ['u-2', { providerID: undefined, revision: 'h5' }],
]);

describe('the orphan sweep collects only what no live Proxy wants', () => {
  it.each([
    ['the recorded instance of a live Proxy', inst('i-new', 'u-1', 'h2'), false],
    [
      'an instance of the revision a live Proxy is creating (not yet recorded)',
      inst('i-5', 'u-2', 'h5'),
      false,
    ],
    [
      'a stale revision of a live Proxy (an interrupted create, then a spec change)',
      inst('i-old', 'u-1', 'h1'),
      true,
    ],
    [
      'an unrevisioned instance of a live Proxy (it cannot be told apart)',
      inst('i-legacy', 'u-1', ''),
      false,
    ],
    ['an instance whose Proxy is gone', inst('i-x', 'u-gone', 'h1'), true],
    ['a young instance whose Proxy is gone (a create in flight)', inst('i-y', 'u-gone', 'h1', 30), false],
    ['a young stale revision', inst('i-z', 'u-1', 'h1', 30), false],
  ])('%s → collected: %s', (_n, instance, collected) => {
    expect(findOrphans([instance], live, NOW, MIN_AGE)).toEqual(collected ? [instance] : []);
  });

  it.each([
    [inst('i-x', 'u-gone', 'h1'), /no live Proxy/],
    [inst('i-old', 'u-1', 'h1'), /stale revision of a live Proxy/],
  ])('says why: %j', (instance, why) => {
    expect(orphanReason(instance, live)).toMatch(why);
  });

  it('reads what each Proxy wants from its status and its spec-hash annotation', () => {
    const p = {
      metadata: { name: 'p', uid: 'u-1', annotations: { [SPEC_HASH_ANNOTATION]: 'h2' } },
      status: { providerID: 'i-new' },
    } as unknown as Proxy;
    expect(wantedBy([p])).toEqual(new Map([['u-1', { providerID: 'i-new', revision: 'h2' }]]));
  });
});

import { findDuplicates, sweepDecisions, type SweepDecision } from '../../handlers/duplicates.js';
import type { SweepScope, Wanted } from '../../handlers/orphans.js';
import type { Instance, InstanceState } from '../../providers/contract.js';

const NOW = new Date('2026-01-01T12:00:00Z');
const MIN_AGE = 600;
const ALL: SweepScope = { owner: 'prod' };

function inst(
  id: string,
  uid: string,
  revision: string,
  age = MIN_AGE + 60,
  state: InstanceState = 'Running',
): Instance {
  return {
    id,
    uid,
    revision,
    ip: '',
    state,
    owner: 'prod',
    namespace: 'team-a',
    createdAt: new Date(NOW.getTime() - age * 1000),
  };
}

const live = new Map<string, Wanted>([
  ['recorded', { providerID: 'i-rec', revision: 'h1' }],
  ['creating', { providerID: undefined, revision: 'h1' }],
  ['replacing', { providerID: 'i-prev', revision: 'h2' }],
]);

/** Which ids are collected, and why. */
function collected(instances: Instance[]): Array<[string, SweepDecision['reason']]> {
  return sweepDecisions(instances, live, ALL, NOW, MIN_AGE)
    .filter((d) => d.decision.collect)
    .map((d) => [d.instance.id, d.decision.reason]);
}

describe('duplicate instances of one revision', () => {
  it.each<[string, Instance[], Array<[string, SweepDecision['reason']]>]>([
    ['one instance of the revision: nothing to do', [inst('i-rec', 'recorded', 'h1')], []],
    [
      'two of the recorded revision: the recorded one stays although it is younger',
      [inst('i-rec', 'recorded', 'h1', MIN_AGE + 10), inst('i-dup', 'recorded', 'h1', MIN_AGE + 900)],
      [['i-dup', 'DuplicateRevision']],
    ],
    [
      'three, none recorded: the oldest stays',
      [
        inst('i-b', 'creating', 'h1', MIN_AGE + 100),
        inst('i-a', 'creating', 'h1', MIN_AGE + 500),
        inst('i-c', 'creating', 'h1', MIN_AGE + 50),
      ],
      [
        ['i-b', 'DuplicateRevision'],
        ['i-c', 'DuplicateRevision'],
      ],
    ],
    [
      'equally old, none recorded: the first by id stays (every sweep picks the same)',
      [inst('i-2', 'creating', 'h1'), inst('i-1', 'creating', 'h1')],
      [['i-2', 'DuplicateRevision']],
    ],
    [
      'a young duplicate is spared (a create may be in flight)',
      [inst('i-rec', 'recorded', 'h1'), inst('i-young', 'recorded', 'h1', 30)],
      [],
    ],
    [
      'a terminated twin bills nothing and is not a duplicate',
      [inst('i-rec', 'recorded', 'h1'), inst('i-gone', 'recorded', 'h1', MIN_AGE + 60, 'Terminated')],
      [],
    ],
    [
      'a replacement under way: the recorded old revision and one of the new are not duplicates',
      [inst('i-prev', 'replacing', 'h1'), inst('i-new', 'replacing', 'h2')],
      [],
    ],
    [
      'a replacement under way with two of the new revision: the older new one stays',
      [
        inst('i-prev', 'replacing', 'h1'),
        inst('i-n1', 'replacing', 'h2', 900),
        inst('i-n2', 'replacing', 'h2', 700),
      ],
      [['i-n2', 'DuplicateRevision']],
    ],
    [
      'two unrevisioned instances cannot be told apart from the wanted one: spared',
      [inst('i-rec', 'recorded', ''), inst('i-u', 'recorded', '')],
      [],
    ],
    [
      'twins of two Proxies are judged per Proxy',
      [inst('i-rec', 'recorded', 'h1'), inst('i-x', 'creating', 'h1')],
      [],
    ],
    [
      'orphans are still collected as orphans beside a duplicate',
      [inst('i-rec', 'recorded', 'h1'), inst('i-dup', 'recorded', 'h1'), inst('i-o', 'gone', 'h1')],
      [
        ['i-dup', 'DuplicateRevision'],
        ['i-o', 'ProxyGone'],
      ],
    ],
  ])('%s', (_n, instances, expected) => {
    expect(collected(instances)).toEqual(expected);
  });

  it('names the kept instance for each extra', () => {
    const extras = findDuplicates([inst('i-rec', 'recorded', 'h1'), inst('i-dup', 'recorded', 'h1')], live);
    expect([...extras].map(([id, keeper]) => [id, keeper.id])).toEqual([['i-dup', 'i-rec']]);
  });

  it("another owner's twins are never judged", () => {
    const other = { ...inst('i-dup', 'recorded', 'h1'), owner: 'staging' };
    expect(
      sweepDecisions([inst('i-rec', 'recorded', 'h1'), other], live, ALL, NOW, MIN_AGE).map(
        (d) => d.decision,
      ),
    ).toEqual([
      { collect: false, reason: 'Wanted' },
      { collect: false, reason: 'OtherOwner' },
    ]);
  });
});

import { egressOf, egressStep, type EgressStep } from '../../book/egress.js';

// Issue 24: when a proxy's cooldowns stop being true (docs/decisions/0020-reports-a-ban-rests-a-rate-limit-paces-a-dead-proxy-leaves.md).

describe("a proxy's egress: what sites see it as", () => {
  it.each<[string, { ip: string; exitIP?: string }, string | undefined]>([
    ['the exit IP when one is read', { ip: '10.0.0.1', exitIP: '203.0.113.1' }, 'exit 203.0.113.1'],
    ['else the listen IP', { ip: '10.0.0.1' }, 'ip 10.0.0.1'],
    ['none between instances', { ip: '' }, undefined],
    [
      'a stale exit IP still decides between instances',
      { ip: '', exitIP: '203.0.113.1' },
      'exit 203.0.113.1',
    ],
  ])('%s', (_n, record, want) => {
    expect(egressOf(record)).toBe(want);
  });
});

describe('what the book does when a record shows an egress', () => {
  it.each<[string, string | undefined, string | undefined, EgressStep]>([
    ['no egress to go by (between instances): nothing', 'ip 10.0.0.1', undefined, 'same'],
    ['the egress it knows: nothing', 'ip 10.0.0.1', 'ip 10.0.0.1', 'same'],
    ['the first egress it hears of: remembered, cooldowns kept', undefined, 'ip 10.0.0.1', 'adopt'],
    ['a new listen IP (no exit IP read): renewed', 'ip 10.0.0.1', 'ip 10.0.0.9', 'renewed'],
    ['a new exit IP: renewed', 'exit 203.0.113.1', 'exit 203.0.113.2', 'renewed'],
    ['the exit IP read for the first time: another kind, kept', 'ip 10.0.0.1', 'exit 203.0.113.1', 'adopt'],
    ['the exit IP no longer read: another kind, kept', 'exit 203.0.113.1', 'ip 10.0.0.1', 'adopt'],
  ])('%s', (_n, known, seen, want) => {
    expect(egressStep(known, seen)).toBe(want);
  });
});

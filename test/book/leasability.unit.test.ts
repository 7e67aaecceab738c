import type { ProxyRecord } from '../../book/catalog.js';
import { leasability, NOT_LEASABLE_CODES, type NotLeasableCode } from '../../book/leasability.js';
import { isLeasable } from '../../book/lease-selection.js';
import type { ProxyCooldown, ProxyUsage } from '../../book/lease-store.js';
import { proxy } from './fixtures.js';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const idle: ProxyUsage = {
  activeLeases: 0,
  stats: { windowSeconds: 900, ok: 0, banned: 0, rate_limited: 0, unreachable: 0 },
};
const at = (seconds: number) => NOW + seconds * 1000;
const iso = (seconds: number) => new Date(at(seconds)).toISOString();

interface Row {
  case: string;
  record?: Partial<ProxyRecord>;
  usage?: Partial<ProxyUsage>;
  cooldowns?: ProxyCooldown[];
  target?: string;
  leasable: boolean;
  codes: NotLeasableCode[];
}

describe('why a proxy is (not) leasable now', () => {
  it.each<Row>([
    { case: 'a healthy idle proxy', leasable: true, codes: [] },
    { case: 'being deleted', record: { phase: 'Deleting' }, leasable: false, codes: ['deleting'] },
    { case: 'draining', record: { draining: true }, leasable: false, codes: ['draining'] },
    { case: 'maxLeases 0', record: { maxLeases: 0 }, leasable: false, codes: ['leases_disabled'] },
    { case: 'no address', record: { ip: '' }, leasable: false, codes: ['no_address'] },
    {
      case: 'unhealthy status',
      record: { healthy: false, phase: 'Unhealthy', healthReason: 'ProbeFailed' },
      leasable: false,
      codes: ['unhealthy'],
    },
    {
      case: 'the book holds it down ahead of a healthy status',
      usage: { held: 'down' },
      leasable: false,
      codes: ['unhealthy'],
    },
    { case: 'suspect', usage: { held: 'suspect' }, leasable: false, codes: ['suspect'] },
    { case: 'every slot taken', usage: { activeLeases: 5 }, leasable: false, codes: ['full'] },
    { case: 'one slot left', usage: { activeLeases: 4 }, leasable: true, codes: [] },
    {
      case: 'cooling down for the global pool, asked for no target',
      cooldowns: [{ until: at(30) }],
      leasable: false,
      codes: ['cooling_down'],
    },
    {
      case: 'cooling down for another target only: still leasable',
      cooldowns: [{ target: 'a.example', until: at(30) }],
      leasable: true,
      codes: ['cooling_down'],
    },
    {
      case: 'cooling down for the asked target',
      cooldowns: [{ target: 'a.example', until: at(30) }],
      target: 'a.example',
      leasable: false,
      codes: ['cooling_down'],
    },
    {
      case: 'a global-pool cooldown does not bench a lease for a target',
      cooldowns: [{ until: at(30) }],
      target: 'a.example',
      leasable: true,
      codes: ['cooling_down'],
    },
    {
      case: 'a cooldown that has ended is no reason',
      cooldowns: [{ target: 'a.example', until: at(0) }],
      target: 'a.example',
      leasable: true,
      codes: [],
    },
    {
      case: 'every reason at once, in the fixed order',
      record: { phase: 'Deleting', draining: true, maxLeases: 0, ip: '', healthy: false },
      usage: { held: 'suspect', activeLeases: 3 },
      cooldowns: [{ target: 'a.example', until: at(30) }],
      leasable: false,
      // full needs a cap to be full against: maxLeases 0 is leases_disabled instead.
      codes: [
        'deleting',
        'draining',
        'leases_disabled',
        'no_address',
        'unhealthy',
        'suspect',
        'cooling_down',
      ],
    },
  ])('$case → leasable $leasable, $codes', (row) => {
    const record = proxy('ns/a', row.record);
    const usage = { ...idle, ...row.usage };
    const answer = leasability(record, usage, row.cooldowns ?? [], NOW, row.target);
    expect(answer.leasable).toBe(row.leasable);
    expect(answer.target).toBe(row.target ?? null);
    expect(answer.reasons.map((r) => r.code)).toEqual(row.codes);
    for (const reason of answer.reasons) expect(reason.message).not.toBe('');
    // The record's own reasons are exactly what isLeasable (the stores' rule) says.
    const recordCodes: NotLeasableCode[] = ['deleting', 'draining', 'leases_disabled', 'no_address'];
    const byRecord = answer.reasons.some(
      (r) => recordCodes.includes(r.code) || (r.code === 'unhealthy' && !record.healthy),
    );
    expect(byRecord).toBe(!isLeasable(record));
  });

  it('says what explains each reason', () => {
    const answer = leasability(
      proxy('ns/a', { healthy: false, phase: 'Unhealthy', healthReason: 'ProxyAuthenticationRequired' }),
      idle,
      [],
      NOW,
    );
    expect(answer.reasons).toEqual([
      {
        code: 'unhealthy',
        healthReason: 'ProxyAuthenticationRequired',
        phase: 'Unhealthy',
        message: 'unhealthy (phase Unhealthy, reason ProxyAuthenticationRequired)',
      },
    ]);
    expect(leasability(proxy('ns/a'), { ...idle, held: 'down' }, [], NOW).reasons).toEqual([
      expect.objectContaining({ code: 'unhealthy', healthReason: null, phase: 'Ready' }),
    ]);
    expect(
      leasability(proxy('ns/a', { maxLeases: 2 }), { ...idle, activeLeases: 2 }, [], NOW).reasons,
    ).toEqual([{ code: 'full', activeLeases: 2, maxLeases: 2, message: 'all 2 lease slots are taken' }]);
  });

  it('lists every running cooldown, earliest end first, the global pool as target null', () => {
    const answer = leasability(
      proxy('ns/a'),
      idle,
      [
        { target: 'b.example', until: at(600) },
        { until: at(60) },
        { target: 'a.example', until: at(600) },
        { target: 'gone.example', until: at(-1) },
      ],
      NOW,
    );
    expect(answer.reasons).toEqual([
      {
        code: 'cooling_down',
        cooldowns: [
          { target: null, until: iso(60) },
          { target: 'a.example', until: iso(600) },
          { target: 'b.example', until: iso(600) },
        ],
        message: 'cooling down for 3 targets after rate_limited/banned reports',
      },
    ]);
  });

  it('the codes are a closed list', () => {
    expect([...NOT_LEASABLE_CODES]).toEqual([
      'deleting',
      'draining',
      'leases_disabled',
      'no_address',
      'unhealthy',
      'suspect',
      'full',
      'cooling_down',
    ]);
  });
});

import { instanceName } from '../../providers/naming.js';

const RFC1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const uids = [
  '0b5a3c1e-8d2f-4c6a-9e7b-1f2d3c4b5a69',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '00000000-0000-0000-0000-000000000000',
  'x',
];

describe('instanceName', () => {
  it.each(uids)('is the same every time for uid %s', (uid) => {
    expect(instanceName(uid)).toBe(instanceName(uid));
  });

  it.each(uids)('for uid %s is "proxy-" + 12 lowercase hex digits', (uid) => {
    expect(instanceName(uid)).toMatch(/^proxy-[0-9a-f]{12}$/);
  });

  it.each(uids)('for uid %s is a valid GCP instance name (RFC 1035, <= 63) and Pod name', (uid) => {
    const name = instanceName(uid);
    expect(name).toMatch(RFC1035);
    expect(name).toMatch(DNS1123_SUBDOMAIN);
    expect(name.length).toBeLessThanOrEqual(63);
  });

  it('differs between UIDs', () => {
    const names = new Set(uids.map((u) => instanceName(u)));
    expect(names.size).toBe(uids.length);
  });

  it('is pinned, so instances made by an older build are still found', () => {
    expect(instanceName('abc')).toBe('proxy-ba7816bf8f01');
  });

  it.each(['', '   '])('refuses an empty UID (%p) with a clear error', (uid) => {
    expect(() => instanceName(uid)).toThrow(/Proxy UID is empty/);
  });
});

describe('instance names with a spec revision', () => {
  it.each([
    [
      'the same UID and revision give the same name (a retried create finds its instance)',
      'u',
      'abcdef0123456789',
      'u',
      'abcdef0123456789',
      true,
    ],
    [
      'a new revision gives a new name (a replacement gets a new providerID)',
      'u',
      'abcdef0123456789',
      'u',
      '0123456789abcdef',
      false,
    ],
    ['another UID gives another name', 'u', 'abcdef0123456789', 'v', 'abcdef0123456789', false],
  ])('%s', (_name, uidA, revA, uidB, revB, same) => {
    expect(instanceName(uidA, revA) === instanceName(uidB, revB)).toBe(same);
  });

  it('keeps the UID prefix and stays a valid GCP instance and Pod name', () => {
    const name = instanceName('abc', 'ABCDEF0123456789');
    expect(name).toBe('proxy-ba7816bf8f01-abcdef01');
    expect(name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(name.length).toBeLessThanOrEqual(63);
  });
});

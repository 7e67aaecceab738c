import {
  credentialsTag,
  desiredRevision,
  legacyCredentialsTag,
  tagNames,
  type DesiredRevision,
} from '../../handlers/credentials-digest.js';
import { legacySpecHash, specHash } from '../../handlers/spec-hash.js';

// The Proxy's spec-hash and credentials-in-use annotations are readable by whoever reads
// Proxies; they must be no test of a guessed password (docs/security.md). An earlier version
// wrote them unkeyed; an upgrade must recognise those values and replace nothing.

const KEY = Buffer.alloc(32, 0x5a);
const OTHER_KEY = Buffer.alloc(32, 0xa5);
const SPEC = { port: 3128, placement: { region: 'europe-west1', machineType: 'e2-small' } };
const CI = '#cloud-config';
const HAND_SET = { username: 'crawler', password: 'hunter2' };

// What the previous version wrote for SPEC, CI and HAND_SET (computed with its code, before
// this change): the legacy form must keep reading back exactly as these.
const WRITTEN_BEFORE = { specHash: 'a403c65e7a6fa600', tag: '4054b6d757d9fc60' };

describe('the legacy form is recognised', () => {
  it('the legacy functions reproduce what the earlier version wrote', () => {
    expect(legacySpecHash(SPEC, CI, HAND_SET)).toBe(WRITTEN_BEFORE.specHash);
    expect(legacyCredentialsTag(HAND_SET)).toBe(WRITTEN_BEFORE.tag);
  });
});

describe('the revision compared with the record (desiredRevision)', () => {
  const wanted = { keyed: specHash(SPEC, CI, HAND_SET, KEY), legacy: legacySpecHash(SPEC, CI, HAND_SET) };
  const rotated = legacySpecHash(SPEC, CI, { ...HAND_SET, password: 'other' });
  const beforeCredentials = legacySpecHash(SPEC, CI, undefined);
  it.each<[string, string | undefined, DesiredRevision]>([
    [
      'an unchanged revision recorded unkeyed: kept as recorded (nothing replaced), rewritten keyed',
      WRITTEN_BEFORE.specHash,
      { hash: WRITTEN_BEFORE.specHash, rewrite: wanted.keyed },
    ],
    [
      'a revision recorded unkeyed, credentials rotated since: the keyed one (replaced)',
      rotated,
      { hash: wanted.keyed },
    ],
    [
      'a revision recorded unkeyed before proxies had credentials: the keyed one (replaced, as before)',
      beforeCredentials,
      { hash: wanted.keyed },
    ],
    ['recorded keyed and unchanged: the keyed one, nothing to rewrite', wanted.keyed, { hash: wanted.keyed }],
    [
      'recorded unkeyed for other credentials: the keyed one (replaced, it is no record of this revision)',
      legacySpecHash(SPEC, CI, { ...HAND_SET, username: 'someone-else' }),
      { hash: wanted.keyed },
    ],
    [
      'recorded keyed, changed: the keyed one (replaced)',
      specHash({ ...SPEC, port: 8080 }, CI, HAND_SET, KEY),
      { hash: wanted.keyed },
    ],
    ['nothing recorded: the keyed one', undefined, { hash: wanted.keyed }],
  ])('%s', (_what, recorded, want) => {
    expect(desiredRevision(recorded, wanted)).toEqual(want);
  });
});

describe('the keyed form', () => {
  it.each<[string, string, RegExp]>([
    ['spec hash', specHash(SPEC, CI, HAND_SET, KEY), /^[0-9a-f]{16}$/],
    ['credentials tag', credentialsTag(HAND_SET, KEY), /^[0-9a-f]{16}$/],
  ])(
    'a %s is 16 hex digits, as before (instance names and labels take it), yet not the unkeyed value',
    (_what, value, form) => {
      expect(value).toMatch(form);
      expect([WRITTEN_BEFORE.specHash, WRITTEN_BEFORE.tag]).not.toContain(value);
    },
  );

  it.each<[string, (key: Buffer) => string]>([
    ['spec hash', (key) => specHash(SPEC, CI, HAND_SET, key)],
    ['credentials tag', (key) => credentialsTag(HAND_SET, key)],
  ])('a %s is stable under one key and differs under another', (_what, of) => {
    expect(of(KEY)).toBe(of(Buffer.from(KEY)));
    expect(of(OTHER_KEY)).not.toBe(of(KEY));
  });

  it.each<[string, string, boolean]>([
    ['a keyed tag of these credentials', credentialsTag(HAND_SET, KEY), true],
    ['a keyed tag of others', credentialsTag({ ...HAND_SET, password: 'x' }, KEY), false],
    ['a keyed tag under another key', credentialsTag(HAND_SET, OTHER_KEY), false],
    ['an unkeyed tag of these credentials (an earlier version)', WRITTEN_BEFORE.tag, true],
    ['an unkeyed tag of others', legacyCredentialsTag({ ...HAND_SET, password: 'x' }), false],
  ])('tagNames: %s -> %s', (_what, tag, names) => {
    expect(tagNames(tag, HAND_SET, KEY)).toBe(names);
  });
});

describe('without the key, the annotations are no test of a guessed password', () => {
  // The attacker reads Proxies: the username (a hand-set one is often guessable), the spec, and
  // the annotations. A dictionary holding the password finds it in the unkeyed form at once.
  const dictionary = ['123456', 'password', 'letmein', 'hunter2', 'qwerty'];
  const guessKeys = [Buffer.alloc(0), Buffer.alloc(32), OTHER_KEY, Buffer.from('proxy-operator')];
  const crack = (matches: (password: string) => boolean) => dictionary.filter(matches);

  it('the legacy values give the password away (the defect this replaces)', () => {
    expect(crack((pw) => legacyCredentialsTag({ ...HAND_SET, password: pw }) === WRITTEN_BEFORE.tag)).toEqual(
      ['hunter2'],
    );
    expect(
      crack((pw) => legacySpecHash(SPEC, CI, { ...HAND_SET, password: pw }) === WRITTEN_BEFORE.specHash),
    ).toEqual(['hunter2']);
  });

  it.each<[string, string, (password: string, key: Buffer) => string]>([
    [
      'credentials tag',
      credentialsTag(HAND_SET, KEY),
      (pw, key) => credentialsTag({ ...HAND_SET, password: pw }, key),
    ],
    [
      'spec hash',
      specHash(SPEC, CI, HAND_SET, KEY),
      (pw, key) => specHash(SPEC, CI, { ...HAND_SET, password: pw }, key),
    ],
  ])('the keyed %s matches no guess, in either form, under any guessed key', (_what, written, keyed) => {
    for (const key of guessKeys) expect(crack((pw) => keyed(pw, key) === written)).toEqual([]);
    expect(crack((pw) => legacyCredentialsTag({ ...HAND_SET, password: pw }) === written)).toEqual([]);
    expect(crack((pw) => legacySpecHash(SPEC, CI, { ...HAND_SET, password: pw }) === written)).toEqual([]);
    expect(written).not.toContain(HAND_SET.password);
  });
});

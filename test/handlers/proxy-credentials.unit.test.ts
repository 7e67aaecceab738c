import {
  CLOUD_INIT_PLACEHOLDERS,
  CREDENTIALS_SECRET_LABEL,
  IN_USE_COPY_LABEL_VALUE,
} from '../../crds/proxy-credentials.js';
import { parseLabelSelector } from '../../framework/utils/label-selector.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import type { SecretLike } from '../../handlers/cloud-init.js';
import {
  CREDENTIALS_IN_USE_ANNOTATION,
  CREDENTIALS_SECRETS,
  credentialsAnswer,
  credentialsRecordMissing,
  type CredentialsAnswer,
  type CredentialsResolution,
  credentialsRotated,
  inUseSecret,
  inUseSecretName,
  servingCredentials,
  credentialsSecret,
  fillCloudInit,
  generateCredentials,
  proxiesUsingCredentials,
  resolveCredentials,
} from '../../handlers/proxy-credentials.js';
import { credentialsTag as keyedTag, legacyCredentialsTag } from '../../handlers/credentials-digest.js';
import { specHash } from '../../handlers/spec-hash.js';

const KEY = Buffer.alloc(32, 7);
const credentialsTag = (c: { username: string; password: string }) => keyedTag(c, KEY);

const b64 = (s: string) => Buffer.from(s).toString('base64');
const proxy = (mode: 'Managed' | 'External', ref?: string): Proxy =>
  ({
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: { name: 'px', namespace: 'fleet' },
    spec:
      mode === 'Managed'
        ? { mode, provider: 'k', port: 3128, maxLeases: 1 }
        : {
            mode,
            port: 3128,
            maxLeases: 1,
            endpoint: {
              host: '203.0.113.7',
              port: 3128,
              ...(ref ? { credentialsSecretRef: { name: ref } } : {}),
            },
          },
  }) as Proxy;
const secret = (name: string, data: Record<string, string>, labelled = true): SecretLike => ({
  metadata: { name, namespace: 'fleet', labels: labelled ? { [CREDENTIALS_SECRET_LABEL]: 'true' } : {} },
  data,
});
/** The Secret with an owner reference to Proxy `owner` (as the operator creates its Secrets). */
const ownedBy = (owner: string, s: SecretLike): SecretLike => ({
  ...s,
  metadata: {
    ...s.metadata,
    ownerReferences: [{ apiVersion: 'crawl.example.com/v1alpha1', kind: 'Proxy', name: owner }],
  },
});
const inUseCopy = (name: string, data: Record<string, string>): SecretLike => ({
  metadata: { name, namespace: 'fleet', labels: { [CREDENTIALS_SECRET_LABEL]: IN_USE_COPY_LABEL_VALUE } },
  data,
});
const lookupOf =
  (...secrets: SecretLike[]) =>
  (ns: string, name: string) =>
    secrets.find((s) => s.metadata?.namespace === ns && s.metadata?.name === name);

describe("a proxy's credentials, read from its Secret", () => {
  const good = { username: b64('crawler'), password: b64('pw') };
  it.each<[string, Proxy, SecretLike[], ReturnType<typeof resolveCredentials>]>([
    ['an External proxy without a reference needs none', proxy('External'), [], { kind: 'none' }],
    [
      'an External proxy reads its referenced, labelled Secret',
      proxy('External', 'creds'),
      [secret('creds', good)],
      { kind: 'ok', credentials: { username: 'crawler', password: 'pw' } },
    ],
    [
      'a Managed proxy reads <name>-proxy-credentials',
      proxy('Managed'),
      [secret('px-proxy-credentials', good)],
      { kind: 'ok', credentials: { username: 'crawler', password: 'pw' } },
    ],
    [
      'a Managed proxy without its Secret gets one',
      proxy('Managed'),
      [],
      { kind: 'missing', secretName: 'px-proxy-credentials' },
    ],
    [
      'a missing External Secret is named, with the label to check',
      proxy('External', 'creds'),
      [],
      {
        kind: 'unavailable',
        message: `credentials Secret fleet/creds not found, or not labelled ${CREDENTIALS_SECRET_LABEL}: "true" (the operator only sees labelled Secrets)`,
      },
    ],
    [
      'a missing key is named',
      proxy('External', 'creds'),
      [secret('creds', { username: b64('crawler') })],
      { kind: 'unavailable', message: 'credentials Secret fleet/creds has no key password' },
    ],
    [
      "an External proxy may not name a Secret the operator made for another Proxy (its endpoint would receive that proxy's credentials)",
      proxy('External', 'victim-proxy-credentials'),
      [ownedBy('victim', secret('victim-proxy-credentials', good))],
      {
        kind: 'unavailable',
        message:
          'credentials Secret fleet/victim-proxy-credentials belongs to Proxy victim (the operator made it for that proxy): an External proxy names a Secret of its own',
      },
    ],
    [
      'nor an in-use copy of one (not labelled "true")',
      proxy('External', 'victim-proxy-credentials-0123456789abcdef'),
      [ownedBy('victim', inUseCopy('victim-proxy-credentials-0123456789abcdef', good))],
      {
        kind: 'unavailable',
        message: `credentials Secret fleet/victim-proxy-credentials-0123456789abcdef not found, or not labelled ${CREDENTIALS_SECRET_LABEL}: "true" (the operator only sees labelled Secrets)`,
      },
    ],
    [
      'an External proxy may name a Secret it owns itself (deleted with it)',
      proxy('External', 'creds'),
      [ownedBy('px', secret('creds', good))],
      { kind: 'ok', credentials: { username: 'crawler', password: 'pw' } },
    ],
    [
      'a Managed proxy reads the Secret the operator made for it (owned by it)',
      proxy('Managed'),
      [ownedBy('px', secret('px-proxy-credentials', good))],
      { kind: 'ok', credentials: { username: 'crawler', password: 'pw' } },
    ],
    [
      'a user name with a colon is refused (basic auth splits there)',
      proxy('External', 'creds'),
      [secret('creds', { username: b64('a:b'), password: b64('pw') })],
      { kind: 'unavailable', message: 'credentials Secret fleet/creds: key "username" contains ":"' },
    ],
  ])('%s', (_case, p, secrets, expected) => {
    expect(resolveCredentials(p, lookupOf(...secrets))).toEqual(expected);
  });

  it('never quotes a value in a message', () => {
    const found = resolveCredentials(
      proxy('External', 'creds'),
      lookupOf(secret('creds', { username: b64('x\ny'), password: b64('hunter2') })),
    );
    expect(JSON.stringify(found)).not.toMatch(/hunter2|x\\ny/);
  });

  it('generates URL-safe credentials with a 144-bit password, into a labelled basic-auth Secret', () => {
    const c = generateCredentials();
    expect(c.username).toMatch(/^proxy-[0-9a-f]{12}$/);
    expect(c.password).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(generateCredentials().password).not.toBe(c.password);
    const s = credentialsSecret(proxy('Managed'), c);
    expect(s).toMatchObject({
      type: 'kubernetes.io/basic-auth',
      metadata: { name: 'px-proxy-credentials', labels: { [CREDENTIALS_SECRET_LABEL]: 'true' } },
      data: { username: b64(c.username), password: b64(c.password) },
    });
  });

  it('fills the cloud-init placeholders, every occurrence', () => {
    const text = `user ${CLOUD_INIT_PLACEHOLDERS.username} ${CLOUD_INIT_PLACEHOLDERS.password} ${CLOUD_INIT_PLACEHOLDERS.username}`;
    expect(fillCloudInit(text, { username: 'u', password: 'p' })).toBe('user u p u');
  });

  it('a rotation changes the spec hash (the instance is replaced), which never holds the password', () => {
    const spec = { port: 3128 };
    const before = specHash(spec, 'ci', { username: 'u', password: 'p1' }, KEY);
    const after = specHash(spec, 'ci', { username: 'u', password: 'p2' }, KEY);
    expect(after).not.toBe(before);
    expect(specHash(spec, 'ci', undefined, KEY)).not.toBe(before);
  });

  it('maps a Secret to the proxies whose credentials it holds', () => {
    const ext = proxy('External', 'creds');
    const managed = proxy('Managed');
    expect(proxiesUsingCredentials(secret('creds', {}), [ext, managed])).toEqual([ext]);
    expect(proxiesUsingCredentials(secret('px-proxy-credentials', {}), [ext, managed])).toEqual([managed]);
  });
});

describe('rotation without an outage: an instance is served with the credentials it was created with (issue 44 item 3)', () => {
  const OLD = { username: 'proxy-old', password: 'old-pw' };
  const NEW = { username: 'proxy-new', password: 'new-pw' };
  const data = (c: { username: string; password: string }) => ({
    username: b64(c.username),
    password: b64(c.password),
  });
  const recorded = (tag: string | undefined, mode: 'Managed' | 'External' = 'Managed') => {
    const p = proxy(mode, mode === 'External' ? 'px-proxy-credentials' : undefined);
    if (tag) p.metadata.annotations = { [CREDENTIALS_IN_USE_ANNOTATION]: tag };
    return p;
  };
  const current = secret('px-proxy-credentials', data(NEW));
  const copyOfOld = inUseCopy(inUseSecretName('px', credentialsTag(OLD)), data(OLD));

  it.each<[string, Proxy, SecretLike[], { username: string; password: string } | undefined]>([
    [
      'rotated, the old copy recorded: the old ones (the instance requires them)',
      recorded(credentialsTag(OLD)),
      [current, copyOfOld],
      OLD,
    ],
    [
      'replaced: the record names the new ones',
      recorded(credentialsTag(NEW)),
      [current, secret(inUseSecretName('px', credentialsTag(NEW)), data(NEW))],
      NEW,
    ],
    [
      'rotated, the old copy made before copies had a label value of their own ("true"): the old ones',
      recorded(credentialsTag(OLD)),
      [current, secret(inUseSecretName('px', credentialsTag(OLD)), data(OLD))],
      OLD,
    ],
    ['no record (an instance from before): the Secret', recorded(undefined), [current, copyOfOld], NEW],
    [
      'the recorded copy not readable (not in the cache yet): the Secret',
      recorded(credentialsTag(OLD)),
      [current],
      NEW,
    ],
    [
      'the recorded copy unlabelled: the Secret',
      recorded(credentialsTag(OLD)),
      [current, { ...copyOfOld, metadata: { ...copyOfOld.metadata, labels: {} } }],
      NEW,
    ],
    [
      'an External proxy switches at once, whatever an annotation says',
      recorded(credentialsTag(OLD), 'External'),
      [current, copyOfOld],
      NEW,
    ],
  ])('%s', (_what, p, secrets, want) => {
    const found = servingCredentials(p, lookupOf(...secrets));
    expect(found.kind === 'ok' ? found.credentials : undefined).toEqual(want);
  });

  it.each<[string, string | undefined, { username: string; password: string } | undefined, boolean]>([
    ['the record names other credentials: rotated', credentialsTag(OLD), NEW, true],
    ['the record names these: not rotated', credentialsTag(NEW), NEW, false],
    ['no record: unknown, not rotated', undefined, NEW, false],
    ['no current credentials: not rotated', credentialsTag(OLD), undefined, false],
    [
      'an unkeyed record of an earlier version naming other credentials: rotated',
      legacyCredentialsTag(OLD),
      NEW,
      true,
    ],
    [
      'an unkeyed record of an earlier version naming these: not rotated',
      legacyCredentialsTag(NEW),
      NEW,
      false,
    ],
  ])('credentialsRotated: %s', (_what, tag, now, want) => {
    expect(credentialsRotated(recorded(tag), now, KEY)).toBe(want);
  });

  it('the copy is an immutable, labelled basic-auth Secret named by a tag that is not the password', () => {
    const copy = inUseSecret(proxy('Managed'), OLD, KEY);
    expect(copy).toMatchObject({
      type: 'kubernetes.io/basic-auth',
      immutable: true,
      metadata: {
        name: `px-proxy-credentials-${credentialsTag(OLD)}`,
        labels: { [CREDENTIALS_SECRET_LABEL]: IN_USE_COPY_LABEL_VALUE },
      },
      data: data(OLD),
    });
    expect(credentialsTag(OLD)).toMatch(/^[0-9a-f]{16}$/);
    expect(credentialsTag(OLD)).not.toBe(credentialsTag(NEW));
  });

  // docs/security.md: delete every credentials Secret to have new ones generated. The copies
  // the instances still serve with must survive that selector, and stay in the operator's view.
  it.each<[string, string, boolean, boolean]>([
    ["a proxy's Secret", 'true', true, true],
    ['a copy in use', IN_USE_COPY_LABEL_VALUE, false, true],
  ])('%s: matched by `-l <label>=true` %s, seen by the operator %s', (_what, value, byDeletion, seen) => {
    const labels = { [CREDENTIALS_SECRET_LABEL]: value };
    expect(parseLabelSelector(`${CREDENTIALS_SECRET_LABEL}=true`)(labels)).toBe(byDeletion);
    expect(parseLabelSelector(CREDENTIALS_SECRETS.labelSelector)(labels)).toBe(seen);
  });

  it('the copy maps back to its proxy (its creation re-reads the proxy for discovery)', () => {
    const p = recorded(credentialsTag(OLD));
    expect(proxiesUsingCredentials(copyOfOld, [p])).toEqual([p]);
    expect(proxiesUsingCredentials(copyOfOld, [recorded(credentialsTag(NEW))])).toEqual([]);
  });
});

describe("what the reconciler does about a Managed proxy's credentials (credentialsAnswer)", () => {
  const FOUND = { username: 'crawler', password: 'pw' };
  const PENDING = { username: 'proxy-generated', password: 'gen-pw' };
  it.each<[string, CredentialsResolution, typeof PENDING | undefined, CredentialsAnswer]>([
    [
      'its Secret holds them: use them',
      { kind: 'ok', credentials: FOUND },
      undefined,
      { kind: 'ok', credentials: FOUND },
    ],
    [
      'its Secret is seen at last: the Secret wins over what was generated',
      { kind: 'ok', credentials: FOUND },
      PENDING,
      { kind: 'ok', credentials: FOUND },
    ],
    [
      'its Secret is unusable: the message says why',
      { kind: 'unavailable', message: 'credentials Secret fleet/px-proxy-credentials has no key password' },
      undefined,
      { kind: 'unusable', message: 'credentials Secret fleet/px-proxy-credentials has no key password' },
    ],
    [
      'none needed is a contradiction for a Managed proxy',
      { kind: 'none' },
      undefined,
      { kind: 'unusable', message: 'a Managed proxy always has credentials' },
    ],
    [
      'no Secret and none generated: generate it',
      { kind: 'missing', secretName: 'px-proxy-credentials' },
      undefined,
      { kind: 'generate', secretName: 'px-proxy-credentials' },
    ],
    [
      'no Secret in the cache yet but generated by this process: use those, never a second password',
      { kind: 'missing', secretName: 'px-proxy-credentials' },
      PENDING,
      { kind: 'ok', credentials: PENDING },
    ],
  ])('%s', (_what, found, pending, want) => {
    expect(credentialsAnswer(found, pending)).toEqual(want);
  });
});

describe('an instance made before its credentials were recorded (credentialsRecordMissing)', () => {
  const HASH = 'h-1';
  const managed = (annotations: Record<string, string>, providerID?: string): Proxy => ({
    ...proxy('Managed'),
    metadata: { name: 'px', namespace: 'fleet', annotations },
    status: providerID ? { phase: 'Ready', providerID } : { phase: 'Pending' },
  });
  it.each<[string, Proxy, string | undefined, boolean]>([
    [
      'the wanted revision exists without a record: record now',
      managed({ [SPEC_HASH_ANNOTATION]: HASH }, 'i-1'),
      HASH,
      true,
    ],
    [
      'already recorded: nothing to do',
      managed({ [SPEC_HASH_ANNOTATION]: HASH, [CREDENTIALS_IN_USE_ANNOTATION]: 'abc' }, 'i-1'),
      HASH,
      false,
    ],
    [
      'the recorded revision is another (a replacement is due): its create records them',
      managed({ [SPEC_HASH_ANNOTATION]: 'h-0' }, 'i-1'),
      HASH,
      false,
    ],
    ['no instance yet: its create records them', managed({ [SPEC_HASH_ANNOTATION]: HASH }), HASH, false],
    [
      'the wanted revision is unknown (cloud-init or credentials unresolved)',
      managed({ [SPEC_HASH_ANNOTATION]: HASH }, 'i-1'),
      undefined,
      false,
    ],
    ['no revision recorded at all', managed({}, 'i-1'), HASH, false],
  ])('%s', (_what, p, desiredHash, want) => {
    expect(credentialsRecordMissing(p, desiredHash)).toBe(want);
  });
});

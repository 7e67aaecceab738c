import {
  CredentialsKeyError,
  onceResolved,
  resolveCredentialsKey,
  type KeySecretApi,
} from '../../cmd/credentials-key.js';

// Start-up's key: the Secret's, else one drawn and stored once; every replica and restart keys
// alike, and a Secret without a usable key stops start-up naming it (a new key would make every
// Proxy's spec hash look changed).

const KEY = Buffer.alloc(32, 3);
const DRAWN = Buffer.alloc(32, 9);
const b64 = (b: Buffer) => b.toString('base64');

function api(stored: string | undefined, opts: { raced?: string; fails?: boolean } = {}) {
  const calls: string[] = [];
  const secret: KeySecretApi = {
    read: async () => {
      calls.push('read');
      if (opts.fails) throw new Error('Forbidden');
      return stored;
    },
    create: async (encoded) => {
      calls.push('create');
      if (opts.raced !== undefined) {
        stored = opts.raced;
        return false;
      }
      stored = encoded;
      return true;
    },
  };
  return { secret, calls };
}

it.each<[string, ReturnType<typeof api>, Buffer, string[]]>([
  ['the Secret exists: its key, nothing created', api(b64(KEY)), KEY, ['read']],
  ['no Secret: a key drawn and stored', api(undefined), DRAWN, ['read', 'create']],
  [
    'another replica created it first: its key, read back',
    api(undefined, { raced: b64(KEY) }),
    KEY,
    ['read', 'create', 'read'],
  ],
])('%s', async (_what, { secret, calls }, want, requests) => {
  expect(await resolveCredentialsKey('ops', secret, () => DRAWN)).toEqual(want);
  expect(calls).toEqual(requests);
});

it.each<[string, ReturnType<typeof api>, string]>([
  [
    'a key too short',
    api(b64(Buffer.alloc(8))),
    'Secret ops/proxy-operator-credentials-key has no key "key" of at least 32 bytes',
  ],
  ['an empty Secret', api(''), 'has no key "key"'],
  ['the API refuses', api(undefined, { fails: true }), 'grant get on it and create on secrets in ops'],
])('%s: start-up stops naming the Secret', async (_what, { secret }, message) => {
  const got = resolveCredentialsKey('ops', secret, () => DRAWN);
  await expect(got).rejects.toThrow(CredentialsKeyError);
  await expect(got).rejects.toThrow(message);
});

it('the controller asks once: a key resolved is kept, a failure asked again at the next reconcile', async () => {
  const answers = [() => Promise.reject(new Error('namespace not found')), () => Promise.resolve(KEY)];
  let asked = 0;
  const key = onceResolved(() => answers[asked++]!());
  await expect(key()).rejects.toThrow('namespace not found');
  expect(await key()).toEqual(KEY);
  expect(await key()).toEqual(KEY);
  expect(asked).toBe(2);
});

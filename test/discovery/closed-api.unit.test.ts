// The pure parts of the closed API, table by table: the token bucket, the tokens file, list
// pages and their continue tokens, the bounded report log, and the re-read of the file.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiTokens, parseTokensFile, tokenDigest } from '../../book/api-tokens.js';
import { page } from '../../discovery/app.js';
import type { ProxyRecord } from '../../book/catalog.js';
import { scopedKey, unscopedKey } from '../../book/lease-owner.js';
import { ListSlots, mayStartList } from '../../discovery/list-slots.js';
import { ReportLog } from '../../discovery/report-log.js';
import { continueToken, DEFAULT_LIST_LIMIT, parseListQuery } from '../../discovery/request-parsing.js';
import { RateLimiter, take, type Bucket } from '../../discovery/token-bucket.js';
import { TokensFileWatcher } from '../../book/tokens-file.js';
import { leaderIdentity } from '../../cmd/leader-identity.js';
import { capturingLogger, proxy } from '../book/fixtures.js';

const LIMITS = { ratePerSecond: 10, burst: 3 };

describe('the concurrent-list cap', () => {
  it.each<[number, number, boolean]>([
    // [in flight, max, may start]
    [0, 1, true],
    [0, 4, true],
    [3, 4, true],
    [4, 4, false],
    [5, 4, false],
  ])('%i in flight of at most %i: %s', (inFlight, max, may) => {
    expect(mayStartList(inFlight, max)).toBe(may);
  });

  it('counts per token name, and a release frees exactly one slot', () => {
    const slots = new ListSlots(2);
    expect([slots.take('a'), slots.take('a'), slots.take('a'), slots.take('b')]).toEqual([
      true,
      true,
      false,
      true,
    ]);
    slots.release('a');
    expect([slots.open('a'), slots.take('a'), slots.take('a')]).toEqual([1, true, false]);
    slots.release('a');
    slots.release('a');
    slots.release('b');
    expect([slots.open('a'), slots.open('b')]).toEqual([0, 0]);
  });

  it.each([0, 1.5, -1])('refuses a cap of %p', (max) => {
    expect(() => new ListSlots(max)).toThrow(/max must be an integer >= 1/);
  });
});

describe('the token bucket', () => {
  it.each<[string, Bucket | undefined, number, boolean, number, number | undefined]>([
    // [case, bucket, now, allowed, tokens after, retryAfterMs]
    ['a new bucket is full', undefined, 0, true, 2, undefined],
    ['one token left', { tokens: 1, at: 0 }, 0, true, 0, undefined],
    ['empty: refused, a token is 100 ms away', { tokens: 0, at: 0 }, 0, false, 0, 100],
    ['half a token: 50 ms away', { tokens: 0, at: 0 }, 50, false, 0.5, 50],
    ['refilled over time', { tokens: 0, at: 0 }, 250, true, 1.5, undefined],
    ['never beyond the burst', { tokens: 0, at: 0 }, 60_000, true, 2, undefined],
    ['a clock going back refills nothing', { tokens: 0.5, at: 1000 }, 900, false, 0.5, 50],
  ])('%s', (_case, bucket, now, allowed, tokens, retryAfterMs) => {
    const result = take(bucket, now, LIMITS);
    expect(result.allowed).toBe(allowed);
    expect(result.bucket.tokens).toBeCloseTo(tokens);
    expect(result.allowed ? undefined : result.retryAfterMs).toBe(retryAfterMs);
  });

  it('keeps one bucket per token name', () => {
    let now = 0;
    const limiter = new RateLimiter(LIMITS, () => now);
    expect([1, 2, 3, 4].map(() => limiter.take('team-a'))).toEqual([undefined, undefined, undefined, 100]);
    expect(limiter.take('team-b')).toBeUndefined();
    now = 100;
    expect(limiter.take('team-a')).toBeUndefined();
  });

  it.each([
    [{ ratePerSecond: 0, burst: 1 }, /ratePerSecond must be a positive number/],
    [{ ratePerSecond: 1, burst: 0.5 }, /burst must be an integer >= 1/],
  ])('refuses limits %j', (limits, message) => {
    expect(() => new RateLimiter(limits)).toThrow(message);
  });
});

describe('the tokens file', () => {
  const A = 'a'.repeat(16);
  const B = 'b'.repeat(24);
  it('reads "<name>: <token>" lines, skipping blanks and comments', () => {
    expect(parseTokensFile(`# teams\nteam-a: ${A}\n\n  team-b :  ${B}  \r\n`, 'f')).toEqual(
      new Map([
        ['team-a', A],
        ['team-b', B],
      ]),
    );
  });

  it.each([
    ['no colon', `team-a ${A}`, /^f:1: expected "<name>: <token>"$/],
    ['an upper-case name', `Team: ${A}`, /^f:1: name "Team" must be 1-63 lower-case/],
    ['a dotted name (it would end the owner early)', `a.b: ${A}`, /^f:1: name "a.b"/],
    ['the reserved name', `anonymous: ${A}`, /not "anonymous"/],
    ['a short token', 'team-a: short', /^f:1: the token of "team-a" must be at least 16/],
    [
      'a word after the token that is no option',
      `team-a: ${A} x`,
      /^f:1: the options of "team-a": word 2 of the line after the name is not an option/,
    ],
    // The first part passes as a token; the rest was echoed as an unknown option.
    [
      'a token with a space in it',
      `team-a: ${A} ${B}`,
      /^f:1: the options of "team-a": word 2 of the line after the name is not an option/,
    ],
    ['a name twice', `x: ${A}\nx: ${B}`, /^f:2: name "x" is given twice$/],
    ['one token under two names', `x: ${A}\ny: ${A}`, /^f:2: the token of "y" is also "x"'s$/],
    ['nothing', '# empty\n', /^f: holds no token/],
  ])('refuses %s, naming the line and never the token', (_case, text, message) => {
    let error: Error | undefined;
    try {
      parseTokensFile(text, 'f');
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toMatch(message);
    expect(error?.message).not.toContain(A);
    expect(error?.message).not.toContain(B);
  });

  it('looks a token up by digest, and a replace applies at once', () => {
    const tokens = new ApiTokens(new Map([['team-a', A]]));
    expect(tokens.nameOf(tokenDigest(A))).toBe('team-a');
    expect(tokens.nameOf(tokenDigest(B))).toBeUndefined();
    tokens.replace(new Map([['team-b', B]]));
    expect([tokens.nameOf(tokenDigest(A)), tokens.nameOf(tokenDigest(B))]).toEqual([undefined, 'team-b']);
  });

  it('is re-read on change; an invalid edit keeps the tokens before it (one error line)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tokens-'));
    const file = join(dir, 'tokens');
    try {
      await writeFile(file, `team-a: ${A}\nteam-b: ${B}\n`);
      const { logger, lines } = capturingLogger('info');
      const tokens = new ApiTokens(parseTokensFile(`team-a: ${A}\nteam-b: ${B}\n`, file));
      const watcher = new TokensFileWatcher(file, tokens, `team-a: ${A}\nteam-b: ${B}\n`, logger);
      await watcher.check();
      expect(lines()).toEqual([]);
      // Revoking team-b alone.
      await writeFile(file, `team-a: ${A}\n`);
      await watcher.check();
      expect(tokens.names).toEqual(['team-a']);
      expect(lines()).toContainEqual(
        expect.objectContaining({ msg: 'discovery API tokens reloaded', removed: ['team-b'], added: [] }),
      );
      await writeFile(file, 'team-a: short\n');
      await watcher.check();
      await watcher.check();
      expect(tokens.names).toEqual(['team-a']);
      expect(
        lines().filter(
          (l) => l.msg === 'tokens file unusable: revoking nothing, keeping the tokens loaded before',
        ),
      ).toHaveLength(1);
      await rm(file);
      await watcher.check();
      await writeFile(file, `team-c: ${B}\n`);
      await watcher.check();
      expect(tokens.names).toEqual(['team-c']);
      expect(JSON.stringify(lines())).not.toContain(A);
      expect(JSON.stringify(lines())).not.toContain(B);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('owner-scoped keys', () => {
  it.each([
    [undefined, 'lease-1', 'lease-1'],
    ['team-a', 'lease-1', 'team-a.lease-1'],
    ['team', 'a.lease-1', 'team.a.lease-1'],
  ])('%s + %s = %s, and back', (owner, key, scoped) => {
    expect(scopedKey(owner, key)).toBe(scoped);
    expect(unscopedKey(owner, scoped)).toBe(key);
  });

  it('never lets one owner spell another owner\'s key (names hold no ".")', () => {
    expect(scopedKey('team', 'a.x')).not.toBe(scopedKey('team-a', 'x'));
  });
});

describe('list pages', () => {
  const records: ProxyRecord[] = ['ns/a', 'ns/b', 'ns/c', 'ns/d', 'ns/e'].map((id) => proxy(id));
  const ids = (r: readonly ProxyRecord[]) => r.map((x) => x.id);
  it.each<[string, { limit: number; after?: string }, string[], string | undefined]>([
    ['the first page', { limit: 2 }, ['ns/a', 'ns/b'], 'ns/b'],
    ['the next one', { limit: 2, after: 'ns/b' }, ['ns/c', 'ns/d'], 'ns/d'],
    ['the last one: no continue', { limit: 2, after: 'ns/d' }, ['ns/e'], undefined],
    ['exactly full: no continue', { limit: 5 }, ids(records), undefined],
    ['after a proxy deleted since', { limit: 2, after: 'ns/bb' }, ['ns/c', 'ns/d'], 'ns/d'],
    ['after the end', { limit: 2, after: 'ns/z' }, [], undefined],
  ])('%s', (_case, query, items, next) => {
    const result = page(records, query);
    expect(ids(result.items)).toEqual(items);
    expect(result.next).toBe(next);
  });

  it.each([
    ['', { limit: DEFAULT_LIST_LIMIT }],
    ['limit=1000', { limit: 1000 }],
    [`limit=3&continue=${continueToken('ns/b')}`, { limit: 3, after: 'ns/b' }],
  ])('parses %j', (query, expected) => {
    expect(parseListQuery(query)).toMatchObject(expected);
  });

  it.each([
    ['limit=0', /limit must be an integer from 1 to 1000/],
    ['limit=1001', /limit must be an integer from 1 to 1000/],
    ['limit=1e3', /limit must be an integer/],
    ['continue=', /continue is not a token this API issued/],
    ['continue=%%%', /continue is not a token this API issued/],
    [`continue=${continueToken('no-slash')}`, /continue is not a token this API issued/],
    ['limit=1&limit=2', /'limit' is given more than once/],
  ])('refuses %j with 400 naming the parameter', (query, message) => {
    expect(() => parseListQuery(query)).toThrow(message);
  });
});

describe('the report log', () => {
  it('writes debug lines and at most one info summary per interval, counts only', () => {
    let now = 0;
    const { logger, lines } = capturingLogger('debug');
    const log = new ReportLog(logger, 60_000, () => now);
    for (let i = 0; i < 1000; i++) {
      now = i * 100; // 100 s of reports
      log.record('cooldown', { target: `site-${i}.example` }, 'proxy cooling down');
    }
    const info = lines().filter((l) => l.level === 30);
    expect(info).toHaveLength(1);
    expect(info[0]).toMatchObject({ cooldown: 601, capped: 0, suspect: 0, session_moved: 0, seconds: 60 });
    expect(JSON.stringify(info)).not.toContain('example');
    expect(lines().filter((l) => l.level === 20)).toHaveLength(1000);
  });
});

describe('the leader identity', () => {
  it.each([
    [undefined, 'node-1', 'node-1_abc'],
    ['', 'node-1', 'node-1_abc'],
    ['proxy-operator-7d9f', 'node-1', 'proxy-operator-7d9f_abc'],
  ])('POD_NAME %j on host %s: %s', (pod, host, identity) => {
    expect(leaderIdentity(pod, host, 'abc')).toBe(identity);
  });

  it('differs between two processes on one host', () => {
    expect(leaderIdentity(undefined, 'node-1')).not.toBe(leaderIdentity(undefined, 'node-1'));
    expect(leaderIdentity(undefined, 'node-1')).toMatch(/^node-1_[0-9a-f]{12}$/);
  });
});

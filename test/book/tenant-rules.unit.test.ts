// The pure rules behind per-token quotas, scopes, private targets and the per-address limit
// (issue 48), each as a table; tenants.unit.test.ts drives them through the real server.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiTokens, readTokensFile, parseTokensFileContent } from '../../book/api-tokens.js';
import { agreed, TRUSTED_REPORTER, withReporter } from '../../book/ban-agreement.js';
import { SourceLimiter } from '../../discovery/source-limiter.js';
import { visibleCooldowns } from '../../discovery/target-privacy.js';
import {
  checkQuotaLimits,
  cooldownVerdict,
  leaseVerdict,
  sessionVerdict,
  TenantLedger,
} from '../../book/tenant-quotas.js';
import { TokensFileWatcher } from '../../book/tokens-file.js';
import { parseTokenOptions, scopeMatcher } from '../../book/token-scope.js';
import { capturingLogger } from './fixtures.js';

describe('quota verdicts', () => {
  it.each([
    [0, 3, 'allow'],
    [2, 3, 'allow'],
    [3, 3, 'lease_quota'],
    [9, 3, 'lease_quota'],
  ])('a token holding %i leases, quota %i: %s', (held, limit, verdict) => {
    expect(leaseVerdict(held, limit)).toBe(verdict);
  });

  it.each([
    [false, 1, 2, 'keep'],
    [false, 2, 2, 'evict_own_oldest'],
    [true, 2, 2, 'keep'],
  ])('a session known=%s with %i live, quota %i: %s', (known, live, limit, verdict) => {
    expect(sessionVerdict(known, live, limit)).toBe(verdict);
  });

  it.each([
    [false, 1, 2, 'allow'],
    [false, 2, 2, 'cooldown_quota'],
    [true, 2, 2, 'allow'],
  ])('a cooldown known=%s with %i running, quota %i: %s', (known, running, limit, verdict) => {
    expect(cooldownVerdict(known, running, limit)).toBe(verdict);
  });

  it.each([
    [{ leases: 0, sessions: 1, cooldowns: 1, reportsPerSecond: 1 }, /quotas.leases must be an integer >= 1/],
    [{ leases: 1, sessions: 1.5, cooldowns: 1, reportsPerSecond: 1 }, /quotas.sessions/],
    [
      { leases: 1, sessions: 1, cooldowns: 1, reportsPerSecond: 0 },
      /quotas.reportsPerSecond must be a positive/,
    ],
  ])('refuses limits %j naming the quota', (limits, message) => {
    expect(() => checkQuotaLimits(limits)).toThrow(message);
  });
});

describe('the tenant ledger', () => {
  const limits = { leases: 2, sessions: 2, cooldowns: 2, reportsPerSecond: 10 };
  it('evicts only the token its own least recently used session, idle ones first', () => {
    const ledger = new TenantLedger(limits, 1000);
    expect(ledger.useSession('b', 's', 0)).toBeUndefined();
    expect(ledger.useSession('a', 's1', 0)).toBeUndefined();
    expect(ledger.useSession('a', 's2', 10)).toBeUndefined();
    expect(ledger.useSession('a', 's1', 20)).toBeUndefined(); // known: touched
    expect(ledger.useSession('a', 's3', 30)).toBe('s2');
    expect(ledger.useSession('a', 's4', 2000)).toBeUndefined(); // the idle ones left instead
  });

  // The lease and cooldown quotas are the book's (the store contract's quota cases).
  it('knows the targets of its own cooldowns', () => {
    const ledger = new TenantLedger(limits, 1000);
    ledger.cooldownRecorded('a', 'p', 'x', 100);
    ledger.cooldownRecorded('a', 'p', 'y', 200);
    expect([ledger.reported('a', 'p', 'y'), ledger.reported('b', 'p', 'y')]).toEqual([true, false]);
  });
});

describe('token options in the tokens file', () => {
  it.each([
    [[], { scope: {}, rotationTrusted: false }],
    [['namespaces=a,b'], { scope: { namespaces: ['a', 'b'] }, rotationTrusted: false }],
    [
      ['selector=pool=x,region=eu'],
      { scope: { selector: { pool: 'x', region: 'eu' } }, rotationTrusted: false },
    ],
    [['rotation-trusted'], { scope: {}, rotationTrusted: true }],
  ])('%j reads as %j', (words, policy) => {
    expect(parseTokenOptions(words)).toEqual(policy);
  });

  it.each([
    [['namespaces=A'], /namespaces: "A" is not a namespace name/],
    [['namespaces=a', 'namespaces=b'], /"namespaces=" is given twice/],
    [['selector=pool'], /selector: "pool" must be key=value/],
    [['selector=a=1,a=2'], /selector: key "a" is given twice/],
    [['trusted'], /word 2 of the line after the name is not an option \(not shown/],
    [['namespaces=a', 'trusted'], /word 3 of the line after the name is not an option/],
    [['rotation-trusted=yes'], /option "rotation-trusted" takes no value/],
    [['namespaces'], /option "namespaces" needs =<value>/],
  ])('%j is refused: %s', (words, message) => {
    expect(() => parseTokenOptions(words)).toThrow(message);
  });

  it('a line without options is as before: every proxy, untrusted (backward compatible)', () => {
    const content = readTokensFile(
      'team-a: aaaaaaaaaaaaaaaa\nteam-b: bbbbbbbbbbbbbbbb namespaces=b rotation-trusted\n',
      'f',
    );
    const tokens = new ApiTokens(content.tokens, content.policies);
    expect(tokens.policyOf('team-a')).toEqual({ scope: {}, rotationTrusted: false });
    expect(tokens.policyOf('team-b')).toEqual({ scope: { namespaces: ['b'] }, rotationTrusted: true });
    expect(tokens.rotationTrusted).toEqual(['team-b']);
  });

  it('names the line and the option, never the token', () => {
    expect(() => readTokensFile('x: aaaaaaaaaaaaaaaa selector=k', 'f')).toThrow(
      /^f:1: the options of "x": selector: "k" must be key=value/,
    );
  });

  it.each([
    [{}, 'ns/p', {}, true],
    [{ namespaces: ['ns'] }, 'ns/p', {}, true],
    [{ namespaces: ['ns'] }, 'other/p', {}, false],
    [{ selector: { pool: 'a' } }, 'ns/p', { pool: 'a' }, true],
    [{ selector: { pool: 'a' } }, 'ns/p', { pool: 'b' }, false],
    [{ namespaces: ['ns'], selector: { pool: 'a' } }, 'other/p', { pool: 'a' }, false],
  ])('scope %j admits %s %j: %s', (scope, id, attributes, admitted) => {
    expect(scopeMatcher(scope)({ id, attributes })).toBe(admitted);
  });
});

describe('private targets (seen by team-a)', () => {
  const cooldowns = [
    { until: 5 },
    { target: 'mine.example', until: 6, reporters: ['team-a'] },
    { target: 'theirs.example', until: 7, reporters: ['team-b'] },
    { target: 'shared.example', until: 8, reporters: ['team-b', 'team-a'] },
    // The book names three reporters at most; this replica took team-a's report.
    { target: 'crowded.example', until: 9, reporters: ['team-b', 'team-c', 'team-d'] },
  ];
  const reportedHere = (t: string) => t === 'crowded.example';
  it.each([
    [
      undefined,
      [
        { until: 5 },
        { target: 'mine.example', until: 6 },
        { until: 7, hidden: true },
        { target: 'shared.example', until: 8 },
        { target: 'crowded.example', until: 9 },
      ],
    ],
    [
      'theirs.example',
      [
        { until: 5 },
        { target: 'mine.example', until: 6 },
        { target: 'theirs.example', until: 7 },
        { target: 'shared.example', until: 8 },
        { target: 'crowded.example', until: 9 },
      ],
    ],
  ])('asked %s: another token target is hidden unless asked; reporters never shown', (asked, visible) => {
    expect(visibleCooldowns(cooldowns, 'team-a', asked, reportedHere)).toEqual(visible);
  });
});

describe('the per-address limit of failed authentications', () => {
  it('blocks an address past its burst until it refills, and forgets the oldest past its cap', () => {
    let now = 0;
    const limiter = new SourceLimiter({ ratePerSecond: 1, burst: 2 }, () => now, 2);
    expect(limiter.blocked('a')).toBeUndefined();
    limiter.failed('a');
    limiter.failed('a');
    expect(limiter.blocked('a')).toBe(1000);
    expect(limiter.blocked('b')).toBeUndefined();
    now = 1000;
    expect(limiter.blocked('a')).toBeUndefined();
    limiter.failed('a');
    limiter.failed('b');
    limiter.failed('c'); // the cap: 'a' is forgotten
    expect(limiter.blocked('a')).toBeUndefined();
  });
});

describe('reloading the tokens file', () => {
  const A = 'a'.repeat(16);
  const B = 'b'.repeat(16);
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'tokens-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('an emptied file revokes every token; an unreadable or invalid one revokes nothing, reported to the status listener', async () => {
    const file = join(dir, 'tokens');
    const first = `team-a: ${A}\nteam-b: ${B}\n`;
    await writeFile(file, first);
    const { logger, lines } = capturingLogger('info');
    const { tokens: names, policies } = parseTokensFileContent(first, file);
    const tokens = new ApiTokens(names, policies);
    const statuses: boolean[] = [];
    const watcher = new TokensFileWatcher(file, tokens, first, logger, 1000, (ok) => statuses.push(ok));
    await writeFile(file, `team-a: ${A}\nteam-b: short\n`);
    await watcher.check();
    expect(tokens.names).toEqual(['team-a', 'team-b']);
    await rm(file);
    await watcher.check();
    expect(tokens.names).toEqual(['team-a', 'team-b']);
    expect(statuses).toEqual([false, false]);
    expect(lines().filter((l) => l.level === 50)).toHaveLength(1);
    await writeFile(file, '# every team locked out\n');
    await watcher.check();
    expect(tokens.names).toEqual([]);
    expect(statuses).toEqual([false, false, true]);
    expect(lines()).toContainEqual(
      expect.objectContaining({
        level: 40,
        msg: 'tokens file holds no token: every discovery API token is revoked',
      }),
    );
  });

  it('refuses an empty file at start-up', () => {
    expect(() => parseTokensFileContent('# nothing\n', 'f')).toThrow(/^f: holds no token/);
  });
});

describe('agreement on a ban (rotation on bans)', () => {
  it.each<[string, [string, number][], boolean]>([
    ['nobody', [], false],
    ['one token', [['a', 10]], false],
    [
      'two tokens',
      [
        ['a', 10],
        ['b', 10],
      ],
      true,
    ],
    [
      'two tokens, one of whose cooldowns ended',
      [
        ['a', 10],
        ['b', 5],
      ],
      false,
    ],
    [
      'a trusted token',
      [
        ['a', 10],
        [TRUSTED_REPORTER, 10],
      ],
      true,
    ],
    [
      'a trusted mark whose cooldown ended',
      [
        ['a', 10],
        [TRUSTED_REPORTER, 5],
      ],
      false,
    ],
  ])('%s at 5: agreed %s', (_case, reporters, expected) => {
    expect(agreed(new Map(reporters), 5)).toBe(expected);
  });

  it('keeps at most three reporters, dropping the earliest to end but never the one reporting', () => {
    const reporters = new Map<string, number>();
    withReporter(reporters, 'a', false, 10, 0);
    withReporter(reporters, 'b', false, 20, 0);
    withReporter(reporters, 'c', false, 30, 0);
    withReporter(reporters, 'd', false, 5, 0);
    expect([...reporters.keys()].sort()).toEqual(['b', 'c', 'd']);
    withReporter(reporters, 'e', true, 40, 6); // d's ended: it goes first
    expect([...reporters.keys()].sort()).toEqual(['*', 'c', 'e']);
  });
});

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  checkMaxUnavailableProviders,
  parseMaxUnavailable,
  parseSettings,
  SettingsError,
  usage,
} from '../../cmd/settings.js';

/** Most cases are not about auth: they say "unauthenticated" unless they give a token. */
/** A token long enough to pass (16 characters at least). */
const T = 'test-token-0123456789';

function parse(argv: string[], env: NodeJS.ProcessEnv): ReturnType<typeof parseSettings> {
  const auth = env.DISCOVERY_TOKEN !== undefined || env.DISCOVERY_TOKENS_FILE !== undefined;
  return parseSettings(argv, auth ? env : { DISCOVERY_UNAUTHENTICATED: 'true', ...env });
}

describe('operator settings', () => {
  it('applies the documented defaults', () => {
    const s = parse([], {});
    expect(s).toMatchObject({
      discovery: {
        host: '0.0.0.0',
        port: 8090,
        rateLimit: { ratePerSecond: 1000, burst: 2000 },
        maxLeaseTTLSeconds: 3600,
      },
      book: {
        cooldownSeconds: 900,
        maxCooldownSeconds: 3600,
        sessionIdleSeconds: 1800,
        maxSessions: 100_000,
      },
      metrics: { host: '0.0.0.0', port: 8080 },
      leaderElect: true,
      controller: {
        orphanSweepIntervalSeconds: 600,
        orphanMinAgeSeconds: 600,
        maxUnavailable: { default: { kind: 'percent', value: 25 }, byProvider: {} },
        replaceUnhealthyAfterSeconds: 900,
      },
      discoveryAuth: { kind: 'none' },
    });
  });

  it('takes flags over environment variables', () => {
    const s = parse(['--discovery-address', '127.0.0.1:9999'], {
      DISCOVERY_ADDRESS: ':1',
      DISCOVERY_TOKEN: T,
    });
    expect(s).toMatchObject({
      discovery: { host: '127.0.0.1', port: 9999 },
      discoveryAuth: { kind: 'token', token: T },
    });
  });

  it.each([
    [['--discovery-address', 'nope'], /--discovery-address: "nope" is not host:port/],
    [['--cooldown=-5'], /--cooldown: "-5" must be an integer >= 1/],
    [['--leader-elect', 'maybe'], /--leader-elect: "maybe" must be true or false/],
    [['--log-level', 'loud'], /--log-level: "loud" must be one of/],
    [['--no-such-flag', 'x'], /Unknown option '--no-such-flag'/],
    [['--max-unavailable', '0'], /--max-unavailable: "0" must be an integer >= 1 or a percentage/],
    [['--replace-unhealthy-after=-1'], /--replace-unhealthy-after: "-1" must be an integer >= 0/],
    [['--max-unavailable', '150%'], /--max-unavailable: "150%" must be an integer >= 1 or a percentage/],
    [['--max-unavailable', 'gcp-eu=x'], /--max-unavailable: "x" must be an integer/],
    [['--max-unavailable', 'GCP=2'], /--max-unavailable: "GCP" is not a provider name/],
    [['--max-unavailable', '2,3'], /sets the default cap twice/],
    [
      ['--cooldown', '600', '--max-cooldown', '300'],
      /--max-cooldown: "300" must be at least --cooldown \(600\)/,
    ],
    [
      ['--rate-limit-cooldown', '30', '--max-rate-limit-cooldown', '20'],
      /--max-rate-limit-cooldown: "20" must be at least --rate-limit-cooldown \(30\)/,
    ],
    [['--max-sessions', '9999'], /--max-sessions: "9999" must be an integer >= 10000/],
    [['--session-idle-timeout', '0'], /--session-idle-timeout: "0" must be an integer >= 1/],
    [['--discovery-session-quota', '0'], /--discovery-session-quota: "0" must be an integer >= 1/],
    [['--discovery-lease-quota', '0'], /--discovery-lease-quota: "0" must be an integer >= 1/],
    [['--discovery-cooldown-quota', '1.5'], /--discovery-cooldown-quota: "1.5" must be an integer >= 1/],
    [['--discovery-book-concurrency', '0'], /--discovery-book-concurrency: "0" must be an integer >= 1/],
    [['--discovery-book-queue', '2.5'], /--discovery-book-queue: "2.5" must be an integer >= 1/],
    [['--cluster-name', 'Prod'], /--cluster-name: "Prod" must be 1-63 lower-case letters/],
    [['--cluster-name', 'eu.prod'], /--cluster-name: "eu.prod" must be 1-63/],
    [['--cluster-name', 'prod-'], /--cluster-name: "prod-" must be 1-63/],
    [['--cluster-name', 'x'.repeat(64)], /--cluster-name: "x+" must be 1-63/],
  ])('rejects %j with a message naming the flag', (argv, message) => {
    expect(() => parse(argv, {})).toThrow(SettingsError);
    expect(() => parse(argv, {})).toThrow(message);
  });

  // A Node timer holds at most 2^31-1 ms; a longer raw timer fires after 1 ms: a timeout that
  // always expires, a wait that never waits. Every duration flag stops start-up beyond it.
  const REDIS = ['--lease-store=redis', '--redis-url=redis://r'];
  it.each<[flag: string, unit: 's' | 'ms', extra?: string[]]>([
    ['cooldown', 's'],
    ['max-cooldown', 's'],
    ['rate-limit-cooldown', 's'],
    ['max-rate-limit-cooldown', 's'],
    ['suspicion-timeout', 's'],
    ['suspicion-holdoff', 's'],
    ['session-idle-timeout', 's'],
    ['max-lease-ttl', 's'],
    ['orphan-sweep-interval', 's'],
    ['orphan-min-age', 's'],
    ['replace-unhealthy-after', 's'],
    ['rotation-drain-timeout', 's'],
    ['instance-poll-interval', 's'],
    ['gateway-lease-ttl', 's'],
    ['gateway-idle-timeout', 's'],
    ['gateway-drain-timeout', 's'],
    ['recheck-interval', 'ms'],
    ['gateway-connect-timeout', 'ms'],
    ['gateway-response-timeout', 'ms'],
    ['redis-timeout', 'ms', REDIS],
  ])('--%s (%s) takes what a timer holds and refuses one more, naming the flag', (flag, unit, extra = []) => {
    const max = unit === 's' ? 2_147_483 : 2_147_483_647;
    // The cooldown ceilings must be at least their base: raise both together.
    const pair = (v: number) =>
      flag === 'cooldown' || flag === 'rate-limit-cooldown'
        ? [`--${flag}=${v}`, `--max-${flag}=${max}`]
        : [`--${flag}=${v}`];
    expect(() => parse([...extra, ...pair(max)], {})).not.toThrow();
    const over = () => parse([...extra, ...pair(max + 1)], {});
    expect(over).toThrow(SettingsError);
    expect(over).toThrow(`--${flag}: "${max + 1}" must be at most ${max} ${unit}`);
  });

  it.each([['1e300'], ['9007199254740993']])(
    'refuses a count past the safe integers: --max-sessions=%s',
    (v) => {
      expect(() => parse([`--max-sessions=${v}`], {})).toThrow(`--max-sessions: "${v}" must be an integer`);
    },
  );

  it('reads --cluster-name or CLUSTER_NAME, and leaves it unset (the kube-system UID) by default', () => {
    expect(parse([], {})).toMatchObject({ clusterName: undefined });
    expect(parse([], { CLUSTER_NAME: 'staging' })).toMatchObject({ clusterName: 'staging' });
    expect(parse(['--cluster-name', 'prod_eu-1'], { CLUSTER_NAME: 'staging' })).toMatchObject({
      clusterName: 'prod_eu-1',
    });
  });

  it('reads the session and cooldown flags and their environment variables', () => {
    const s = parse(['--max-cooldown', '7200', '--max-sessions', '20000'], {
      SESSION_IDLE_TIMEOUT_SECONDS: '600',
      MAX_SESSIONS: '50000',
    });
    expect(s).toMatchObject({
      book: { maxCooldownSeconds: 7200, sessionIdleSeconds: 600, maxSessions: 20_000 },
    });
  });

  it.each([
    ['a trailing newline (a Secret made with --from-file)', `${T}\n`, T],
    ['surrounding spaces and CRLF', `  ${T}\r\n`, T],
  ])('trims DISCOVERY_TOKEN with %s', (_case, raw, token) => {
    expect(parse([], { DISCOVERY_TOKEN: raw })).toMatchObject({ discoveryAuth: { kind: 'token', token } });
  });

  describe('the discovery API is closed by default', () => {
    it.each([
      [
        'nothing',
        [],
        {},
        /--discovery-tokens-file: the discovery API needs a token.*--discovery-unauthenticated=true/,
      ],
      [
        'a DISCOVERY_TOKEN of whitespace only',
        [],
        { DISCOVERY_TOKEN: ' \n' },
        /--discovery-tokens-file: the discovery API needs a token/,
      ],
      [
        'a tokens file and DISCOVERY_TOKEN',
        ['--discovery-tokens-file', '/etc/tokens'],
        { DISCOVERY_TOKEN: T },
        /--discovery-tokens-file: given together with DISCOVERY_TOKEN/,
      ],
      [
        'unauthenticated and a token',
        ['--discovery-unauthenticated=true'],
        { DISCOVERY_TOKEN: T },
        /--discovery-unauthenticated: given together with a token/,
      ],
      [
        'a rate of 0',
        ['--discovery-rate-limit', '0'],
        { DISCOVERY_TOKEN: T },
        /--discovery-rate-limit: "0" must be a positive number/,
      ],
      [
        'a burst of 1.5',
        ['--discovery-rate-burst', '1.5'],
        { DISCOVERY_TOKEN: T },
        /--discovery-rate-burst: "1.5" must be an integer >= 1/,
      ],
    ])('refuses %s, naming the key', (_case, argv, env, message) => {
      expect(() => parseSettings(argv, env)).toThrow(SettingsError);
      expect(() => parseSettings(argv, env)).toThrow(message);
    });

    it.each([
      [
        'a tokens file (flag)',
        ['--discovery-tokens-file', '/etc/t'],
        {},
        { kind: 'tokens-file', path: '/etc/t' },
      ],
      [
        'a tokens file (env)',
        [],
        { DISCOVERY_TOKENS_FILE: '/etc/t' },
        { kind: 'tokens-file', path: '/etc/t' },
      ],
      ['DISCOVERY_TOKEN', [], { DISCOVERY_TOKEN: T }, { kind: 'token', token: T }],
      ['the explicit flag', ['--discovery-unauthenticated=true'], {}, { kind: 'none' }],
      ['its variable', [], { DISCOVERY_UNAUTHENTICATED: 'true' }, { kind: 'none' }],
      ['a controller-only process (it serves no API)', ['--components=controller'], {}, { kind: 'none' }],
    ])('accepts %s', (_case, argv, env, auth) => {
      expect(parseSettings(argv, env)).toMatchObject({ discoveryAuth: auth });
    });

    it('reads the rate-limit flags', () => {
      expect(
        parseSettings(['--discovery-rate-limit', '2.5'], { DISCOVERY_TOKEN: T, DISCOVERY_RATE_BURST: '7' }),
      ).toMatchObject({ discovery: { rateLimit: { ratePerSecond: 2.5, burst: 7 } } });
    });
  });

  it('refuses a DISCOVERY_TOKEN with whitespace inside or under 16 characters, and half a TLS pair, naming the key', () => {
    expect(() => parse([], { DISCOVERY_TOKEN: 'two words' })).toThrow(
      /DISCOVERY_TOKEN: must not contain whitespace inside the token/,
    );
    expect(() => parse([], { DISCOVERY_TOKEN: 'fifteen-chars-x' })).toThrow(
      /^DISCOVERY_TOKEN: must be at least 16 characters \(got 15\)/,
    );
    expect(() => parse(['--discovery-tls-cert', '/c.pem'], { DISCOVERY_TOKEN: T })).toThrow(
      /^--discovery-tls-key: required with --discovery-tls-cert$/,
    );
    expect(() => parse(['--discovery-tls-key', '/k.pem'], { DISCOVERY_TOKEN: T })).toThrow(
      /^--discovery-tls-cert: required with --discovery-tls-key$/,
    );
    const both = parse(['--discovery-tls-cert', '/c.pem', '--discovery-tls-key', '/k.pem'], {
      DISCOVERY_TOKEN: T,
    });
    expect(both).toMatchObject({ discovery: { tls: { certFile: '/c.pem', keyFile: '/k.pem' } } });
  });

  it('documents every flag in --help', () => {
    expect(parse(['--help'], {})).toBe('help');
    for (const flag of [
      '--providers-config',
      '--discovery-address',
      '--metrics-address',
      '--leader-elect',
      '--log-level',
      '--max-unavailable',
      '--max-cooldown',
      '--session-idle-timeout',
      '--max-sessions',
    ]) {
      expect(usage()).toContain(flag);
    }
  });
});

describe('--max-unavailable', () => {
  it.each([
    ['25%', { default: { kind: 'percent', value: 25 }, byProvider: {} }],
    ['3', { default: { kind: 'count', value: 3 }, byProvider: {} }],
    [
      '1, gcp-eu=10%,kubernetes=4',
      {
        default: { kind: 'count', value: 1 },
        byProvider: { 'gcp-eu': { kind: 'percent', value: 10 }, kubernetes: { kind: 'count', value: 4 } },
      },
    ],
    [
      'gcp-eu=2',
      { default: { kind: 'percent', value: 25 }, byProvider: { 'gcp-eu': { kind: 'count', value: 2 } } },
    ],
  ])('reads %j', (value, want) => {
    expect(parseMaxUnavailable('max-unavailable', value)).toEqual(want);
  });

  it('is taken from MAX_UNAVAILABLE too', () => {
    const s = parse([], { MAX_UNAVAILABLE: '2' });
    expect(s).toMatchObject({ controller: { maxUnavailable: { default: { kind: 'count', value: 2 } } } });
  });

  it('stops start-up when it names a provider that is not configured', () => {
    const setting = parseMaxUnavailable('max-unavailable', 'gcp-us=2');
    expect(() => checkMaxUnavailableProviders(setting, ['mock', 'gcp-eu'])).toThrow(
      '--max-unavailable: provider "gcp-us" is not configured (configured: mock, gcp-eu)',
    );
    expect(() => checkMaxUnavailableProviders(setting, ['gcp-us'])).not.toThrow();
  });
});

describe('the lease store and components flags', () => {
  it('defaults to the memory store and every component, the gateway on :8888', () => {
    expect(parse([], {})).toMatchObject({
      leaseStore: { kind: 'memory' },
      components: ['controller', 'discovery', 'gateway'],
      gateway: {
        host: '0.0.0.0',
        port: 8888,
        maxAttempts: 3,
        connectTimeoutMs: 5000,
        responseTimeoutMs: 60_000,
        tunnelIdleSeconds: 120,
        ttlSeconds: 60,
        idleSeconds: 15,
        bannedCodes: [403],
        rateLimitedCodes: [429],
        drainSeconds: 20,
      },
    });
  });

  it('reads the gateway flags and their environment variables', () => {
    expect(
      parse(
        [
          '--gateway-address=127.0.0.1:3129',
          '--gateway-max-attempts=5',
          '--gateway-ban-codes=403, 451,403',
          '--gateway-rate-limit-codes=',
          '--gateway-drain-timeout=0',
        ],
        {
          GATEWAY_CONNECT_TIMEOUT_MS: '800',
          GATEWAY_RESPONSE_TIMEOUT_MS: '9000',
          GATEWAY_TUNNEL_IDLE_TIMEOUT: '600',
          GATEWAY_LEASE_TTL: '120',
          GATEWAY_IDLE_TIMEOUT: '2',
        },
      ),
    ).toMatchObject({
      gateway: {
        host: '127.0.0.1',
        port: 3129,
        maxAttempts: 5,
        connectTimeoutMs: 800,
        responseTimeoutMs: 9000,
        tunnelIdleSeconds: 600,
        ttlSeconds: 120,
        idleSeconds: 2,
        bannedCodes: [403, 451],
        rateLimitedCodes: [],
        drainSeconds: 0,
      },
    });
  });

  it.each<[string, string[], NodeJS.ProcessEnv, object]>([
    [
      'redis:// with the defaults',
      ['--lease-store=redis', '--redis-url=redis://redis.proxy-operator-system:6379'],
      {},
      {
        kind: 'redis',
        url: 'redis://redis.proxy-operator-system:6379',
        keyPrefix: 'proxy-operator',
        timeoutMs: 1000,
      },
    ],
    [
      'rediss:// (TLS), a database, a prefix and a timeout',
      [
        '--lease-store',
        'redis',
        '--redis-url',
        'rediss://cache.example:6380/2',
        '--redis-key-prefix',
        'eu.crawl',
        '--redis-timeout',
        '250',
      ],
      {},
      { kind: 'redis', url: 'rediss://cache.example:6380/2', keyPrefix: 'eu.crawl', timeoutMs: 250 },
    ],
    [
      'everything from the environment, the password from a Secret',
      [],
      {
        LEASE_STORE: 'redis',
        REDIS_URL: 'redis://r:6379',
        REDIS_PASSWORD: 's3cret\n',
        REDIS_USERNAME: 'crawl',
      },
      { kind: 'redis', url: 'redis://r:6379', password: 's3cret', username: 'crawl' },
    ],
    [
      'a password inside REDIS_URL (env, from a Secret) is accepted',
      [],
      { LEASE_STORE: 'redis', REDIS_URL: 'redis://:pw@r:6379' },
      { kind: 'redis', url: 'redis://:pw@r:6379' },
    ],
  ])('reads %s', (_case, argv, env, want) => {
    expect(parse(argv, env)).toMatchObject({ leaseStore: want });
  });

  it.each<[string[], RegExp]>([
    [['--lease-store=etcd'], /--lease-store: "etcd" must be memory or redis/],
    [['--lease-store=redis'], /--redis-url: required with --lease-store=redis/],
    [['--redis-url=redis://r:6379'], /--redis-url: given, but --lease-store is memory/],
    [['--lease-store=redis', '--redis-url=http://r:6379'], /--redis-url: "http:" must be redis: or rediss:/],
    [['--lease-store=redis', '--redis-url=not a url'], /--redis-url: "not a url" is not a URL/],
    [
      ['--lease-store=redis', '--redis-url=redis://r:6379/x'],
      /--redis-url: path "\/x" must be a database number/,
    ],
    [
      ['--lease-store=redis', '--redis-url=redis://:pw@r:6379'],
      /--redis-url: holds a password; pass it in REDIS_PASSWORD/,
    ],
    [
      ['--lease-store=redis', '--redis-url=redis://r', '--redis-key-prefix={x}'],
      /--redis-key-prefix: "\{x\}" must be 1-64/,
    ],
    [
      ['--lease-store=redis', '--redis-url=redis://r', '--redis-timeout=5'],
      /--redis-timeout: "5" must be an integer >= 10/,
    ],
    [['--components=api'], /--components: "api" is not a component/],
    [['--components=,'], /--components: "," names no component/],
    [['--components=discovery'], /--components: discovery without controller needs --lease-store=redis/],
    [['--components=gateway'], /--components: gateway without controller needs --lease-store=redis/],
    [['--gateway-address=8888'], /--gateway-address: "8888" is not host:port/],
    [['--gateway-max-attempts=0'], /--gateway-max-attempts: "0" must be an integer >= 1/],
    [
      ['--gateway-tunnel-idle-timeout=0'],
      /--gateway-tunnel-idle-timeout: "0" must be an integer from 1 to 86400/,
    ],
    [
      ['--gateway-tunnel-idle-timeout=5m'],
      /--gateway-tunnel-idle-timeout: "5m" must be an integer from 1 to 86400/,
    ],
    // A Node timer past 2^31 ms fires at once: it would cut every tunnel, never none.
    [
      ['--gateway-tunnel-idle-timeout=2592000'],
      /--gateway-tunnel-idle-timeout: "2592000" must be an integer from 1 to 86400/,
    ],
    [['--gateway-ban-codes=403,forbidden'], /--gateway-ban-codes: "forbidden" is not an HTTP status code/],
    [['--gateway-rate-limit-codes=4290'], /--gateway-rate-limit-codes: "4290" is not an HTTP status code/],
  ])('rejects %j naming the flag', (argv, message) => {
    expect(() => parse(argv, {})).toThrow(SettingsError);
    expect(() => parse(argv, {})).toThrow(message);
  });

  // REDIS_URL may carry the password (from a Secret); a start-up error goes to the logs.
  it.each([
    ['no host', 'redis:/:hunter2-secret@r', /--redis-url: "\*\*\*@r" names no host/],
    [
      'not a URL',
      'redis://:hunter2-secret@bad host:6379',
      /--redis-url: "redis:\/\/\*\*\*@bad host:6379" is not a URL/,
    ],
    [
      'an @ and a / in the password',
      'redis://u:hun/ter@2-secret@ x',
      /--redis-url: "redis:\/\/\*\*\*@ x" is not a URL/,
    ],
    ['no scheme', ':hunter2-secret@', /--redis-url: "\*\*\*@" is not a URL/],
  ])('a REDIS_URL refused for %s never shows its password', (_case, url, message) => {
    const refused = () => parse(['--lease-store=redis'], { REDIS_URL: url });
    expect(refused).toThrow(message);
    expect(refused).not.toThrow(/hunter|secret/);
  });

  it.each<[string[], string[]]>([
    [['--components=controller'], ['controller']],
    [['--components=discovery', '--lease-store=redis', '--redis-url=redis://r'], ['discovery']],
    [['--components=gateway', '--lease-store=redis', '--redis-url=redis://r'], ['gateway']],
    [
      ['--components', 'discovery, controller,discovery'],
      ['discovery', 'controller'],
    ],
  ])('reads %j', (argv, want) => {
    expect(parse(argv, {})).toMatchObject({ components: want });
  });

  // The flag reference lives in the README, "Operator flags" (docs/deploying.md links it).
  it('every flag of --help is in the flag reference of the README', () => {
    const page = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');
    const start = page.indexOf('\n## Operator flags\n');
    expect(start).toBeGreaterThan(-1);
    const end = page.indexOf('\n## ', start + 1);
    const reference = page.slice(start, end === -1 ? undefined : end);
    const flags = [...usage().matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]).filter((f) => f !== '--help');
    expect(flags.length).toBeGreaterThan(20);
    expect(flags.filter((flag) => !reference.includes(flag))).toEqual([]);
  });

  it('documents the flags and the env-only secrets in --help', () => {
    for (const text of [
      '--lease-store',
      '--redis-url',
      '--redis-key-prefix',
      '--redis-timeout',
      '--components',
      'REDIS_PASSWORD',
    ]) {
      expect(usage()).toContain(text);
    }
  });
});

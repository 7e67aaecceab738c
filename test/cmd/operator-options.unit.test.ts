import 'reflect-metadata';
import {
  clusterAddressesAdded,
  handlerSettingsFrom,
  leaderElectionFrom,
  needsOwnerIdentity,
} from '../../cmd/operator-options.js';
import { DEFAULT_EXTERNAL_ENDPOINTS } from '../../providers/endpoint-ranges.js';
import { parseSettings, type Settings } from '../../cmd/settings.js';
import {
  DEFAULT_GATEWAY_SETTINGS,
  DEFAULT_HANDLER_SETTINGS,
  type HandlerSettings,
} from '../../handlers/settings.js';

// Issue 26 item 5: every setting reaches the handlers through one pure mapping; each row
// is a flag (or environment variable) and where its value must land.
function settings(argv: string[], env: NodeJS.ProcessEnv = {}): Settings {
  const s = parseSettings(argv, { DISCOVERY_UNAUTHENTICATED: 'true', ...env });
  if (s === 'help') throw new Error('help');
  return s;
}
const facts = { clusterName: 'c1', credentialsKey: () => Promise.resolve(Buffer.alloc(32, 1)) };

describe('handlerSettingsFrom', () => {
  it('with no flags: the handler defaults, the owner identity and an open API', () => {
    const h = handlerSettingsFrom(settings([]), facts);
    expect(h).toEqual({
      ...DEFAULT_HANDLER_SETTINGS,
      ownerID: 'c1',
      credentialsKey: facts.credentialsKey,
      probeCA: undefined,
      maxUnavailable: { default: { kind: 'percent', value: 25 }, byProvider: {} },
      discovery: {
        ...DEFAULT_HANDLER_SETTINGS.discovery,
        host: '0.0.0.0',
        port: 8090,
        token: '',
        rateLimit: { ratePerSecond: 1000, burst: 2000 },
        fairShare: { inFlight: 16, queuedPerToken: 256 },
        metricsTargetNames: false,
      },
      gateway: DEFAULT_GATEWAY_SETTINGS,
    });
  });

  it('serves no gateway when --components leaves it out', () => {
    expect(
      handlerSettingsFrom(settings(['--components=controller,discovery']), facts).gateway,
    ).toBeUndefined();
  });

  it.each<[string, string[], NodeJS.ProcessEnv, (h: HandlerSettings) => unknown, unknown]>([
    [
      '--orphan-sweep-interval',
      ['--orphan-sweep-interval', '17'],
      {},
      (h) => h.orphanSweepIntervalSeconds,
      17,
    ],
    ['--orphan-min-age', ['--orphan-min-age', '0'], {}, (h) => h.orphanMinAgeSeconds, 0],
    ['--health-concurrency', ['--health-concurrency', '9'], {}, (h) => h.healthConcurrency, 9],
    ['--recheck-interval', ['--recheck-interval', '250'], {}, (h) => h.recheckIntervalMillis, 250],
    [
      '--max-unavailable',
      ['--max-unavailable', '3,gcp=1'],
      {},
      (h) => h.maxUnavailable,
      { default: { kind: 'count', value: 3 }, byProvider: { gcp: { kind: 'count', value: 1 } } },
    ],
    [
      '--replace-unhealthy-after',
      ['--replace-unhealthy-after', '0'],
      {},
      (h) => h.replaceUnhealthyAfterSeconds,
      0,
    ],
    ['--rotation-drain-timeout', ['--rotation-drain-timeout', '45'], {}, (h) => h.rotationDrainSeconds, 45],
    ['--instance-poll-interval', ['--instance-poll-interval', '1'], {}, (h) => h.instancePollSeconds, 1],
    [
      '--discovery-address',
      ['--discovery-address', '127.0.0.1:9'],
      {},
      (h) => [h.discovery.host, h.discovery.port],
      ['127.0.0.1', 9],
    ],
    ['--cooldown', ['--cooldown', '60'], {}, (h) => h.book.cooldownSeconds, 60],
    ['--max-cooldown', ['--max-cooldown', '7200'], {}, (h) => h.book.maxCooldownSeconds, 7200],
    ['--rate-limit-cooldown', ['--rate-limit-cooldown', '3'], {}, (h) => h.book.rateLimitCooldownSeconds, 3],
    [
      '--single-cooldown-window',
      ['--single-cooldown-window', 'true'],
      {},
      (h) => h.book.singleCooldownWindow,
      true,
    ],
    [
      '--max-rate-limit-cooldown',
      ['--max-rate-limit-cooldown', '30'],
      {},
      (h) => h.book.maxRateLimitCooldownSeconds,
      30,
    ],
    ['--suspicion-holdoff', ['--suspicion-holdoff', '0'], {}, (h) => h.book.suspicionHoldoffSeconds, 0],
    ['--suspicion-timeout', ['--suspicion-timeout', '5'], {}, (h) => h.book.suspicionTimeoutSeconds, 5],
    ['--session-idle-timeout', ['--session-idle-timeout', '11'], {}, (h) => h.book.sessionIdleSeconds, 11],
    ['--max-sessions', ['--max-sessions', '20000'], {}, (h) => h.book.maxSessions, 20_000],
    [
      '--discovery-session-quota',
      ['--discovery-session-quota', '500'],
      {},
      (h) => h.discovery.sessionQuota,
      500,
    ],
    ['DISCOVERY_SESSION_QUOTA', [], { DISCOVERY_SESSION_QUOTA: '700' }, (h) => h.discovery.sessionQuota, 700],
    ['--discovery-lease-quota', ['--discovery-lease-quota', '3'], {}, (h) => h.discovery.leaseQuota, 3],
    ['DISCOVERY_LEASE_QUOTA', [], { DISCOVERY_LEASE_QUOTA: '7' }, (h) => h.discovery.leaseQuota, 7],
    [
      '--discovery-cooldown-quota',
      ['--discovery-cooldown-quota', '4'],
      {},
      (h) => h.discovery.cooldownQuota,
      4,
    ],
    ['--max-lease-ttl', ['--max-lease-ttl', '99'], {}, (h) => h.discovery.maxLeaseTTLSeconds, 99],
    [
      '--discovery-rate-limit and burst',
      ['--discovery-rate-limit', '5', '--discovery-rate-burst', '6'],
      {},
      (h) => h.discovery.rateLimit,
      { ratePerSecond: 5, burst: 6 },
    ],
    [
      '--discovery-book-concurrency and queue',
      ['--discovery-book-concurrency', '4', '--discovery-book-queue', '32'],
      {},
      (h) => h.discovery.fairShare,
      { inFlight: 4, queuedPerToken: 32 },
    ],
    [
      'DISCOVERY_TOKEN',
      [],
      { DISCOVERY_TOKEN: 's3cret-long-enough-0123', DISCOVERY_UNAUTHENTICATED: '' },
      (h) => [h.discovery.token, h.discovery.tokensFile],
      ['s3cret-long-enough-0123', undefined],
    ],
    [
      '--discovery-tokens-file',
      ['--discovery-tokens-file', '/t'],
      { DISCOVERY_UNAUTHENTICATED: '' },
      (h) => [h.discovery.token, h.discovery.tokensFile],
      ['', '/t'],
    ],
  ])('%s', (_flag, argv, env, read, expected) => {
    expect(read(handlerSettingsFrom(settings(argv, env), facts))).toEqual(expected);
  });

  it('the probe CA is what start-up read from --probe-ca-file', () => {
    expect(handlerSettingsFrom(settings([]), { ...facts, probeCA: 'PEM' }).probeCA).toBe('PEM');
  });
});

describe('--probe-ca-file', () => {
  it.each<[string[], NodeJS.ProcessEnv, string | undefined]>([
    [[], {}, undefined],
    [['--probe-ca-file', '/ca.pem'], {}, '/ca.pem'],
    [[], { PROBE_CA_FILE: '/env.pem' }, '/env.pem'],
    [['--probe-ca-file', '/flag.pem'], { PROBE_CA_FILE: '/env.pem' }, '/flag.pem'],
  ])('%j with %j → %s', (argv, env, expected) => {
    expect(settings(argv, env).probeCAFile).toBe(expected);
  });
});

describe('leaderElectionFrom', () => {
  it.each<[string[], ReturnType<typeof leaderElectionFrom>]>([
    [[], { namespace: 'proxy-operator-system', name: 'proxy-operator-leader', identity: 'me' }],
    [['--leader-elect=false'], false],
    [
      ['--leader-election-namespace', 'ns', '--leader-election-id', 'l'],
      { namespace: 'ns', name: 'l', identity: 'me' },
    ],
    [
      ['--components', 'controller'],
      { namespace: 'proxy-operator-system', name: 'proxy-operator-leader', identity: 'me' },
    ],
    [['--components', 'discovery', '--lease-store', 'redis', '--redis-url', 'redis://127.0.0.1:6379'], false],
  ])('%j → %j', (argv, expected) => {
    expect(leaderElectionFrom(settings(argv), 'me')).toEqual(expected);
  });
});

describe('needsOwnerIdentity (reading the kube-system Namespace without --cluster-name)', () => {
  const redis = ['--lease-store', 'redis', '--redis-url', 'redis://127.0.0.1:6379'];
  it.each<[string[], boolean]>([
    [[], true],
    [['--components', 'controller', ...redis], true],
    [['--components', 'controller,discovery'], true],
    // Its ServiceAccount may not read Namespaces (charts/operator-permissions.ts).
    [['--components', 'discovery', ...redis], false],
  ])('%j → %s', (argv, expected) => {
    expect(needsOwnerIdentity(settings(argv).components)).toBe(expected);
  });
});

describe('the External endpoint settings (the providers config, issue 44 item 5)', () => {
  it('reach the handlers as start-up read them', () => {
    const external = { allowRanges: ['loopback'] as const, allowCIDRs: [], clusterCIDRs: ['10.96.0.0/12'] };
    expect(
      handlerSettingsFrom(settings([]), { ...facts, externalEndpoints: external }).externalEndpoints,
    ).toEqual(external);
    expect(handlerSettingsFrom(settings([]), facts).externalEndpoints).toEqual(DEFAULT_EXTERNAL_ENDPOINTS);
  });

  // The API server's addresses join the cluster range without any permission to learn them.
  it.each<[string, { serviceHost?: string; server?: string }, readonly string[], string[]]>([
    [
      'in a Pod: the kubernetes Service and the server',
      { serviceHost: '10.96.0.1', server: 'https://10.96.0.1:443' },
      [],
      ['10.96.0.1'],
    ],
    [
      'beside the configured CIDRs',
      { serviceHost: '10.0.0.1' },
      ['10.244.0.0/16'],
      ['10.244.0.0/16', '10.0.0.1'],
    ],
    ['an IPv6 server', { server: 'https://[fd00::1]:6443' }, [], ['fd00::1']],
    [
      'a server by name: nothing to add (its addresses may change)',
      { server: 'https://api.example.com:6443' },
      [],
      [],
    ],
    [
      'a loopback server (the tests): already refused as loopback',
      { server: 'https://127.0.0.1:6443' },
      [],
      [],
    ],
    ['no environment at all', {}, ['10.96.0.0/12'], ['10.96.0.0/12']],
    ['a server that is no URL', { server: 'not a url' }, [], []],
  ])('%s', (_what, known, configured, expected) => {
    const external = { ...DEFAULT_EXTERNAL_ENDPOINTS, clusterCIDRs: configured };
    expect(clusterAddressesAdded(external, known).clusterCIDRs).toEqual(expected);
  });
});

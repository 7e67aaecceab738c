import { parseSettings, SettingsError, usage } from '../../cmd/settings.js';

describe('operator settings', () => {
  it('applies the documented defaults', () => {
    const s = parseSettings([], {});
    expect(s).toMatchObject({
      discovery: { host: '0.0.0.0', port: 8090 },
      metrics: { host: '0.0.0.0', port: 8080 },
      leaderElect: true,
      cooldownSeconds: 900,
      orphanSweepIntervalSeconds: 600,
      orphanMinAgeSeconds: 600,
      discoveryToken: '',
    });
  });

  it('takes flags over environment variables', () => {
    const s = parseSettings(['--discovery-address', '127.0.0.1:9999'], {
      DISCOVERY_ADDRESS: ':1',
      DISCOVERY_TOKEN: 't',
    });
    expect(s).toMatchObject({ discovery: { host: '127.0.0.1', port: 9999 }, discoveryToken: 't' });
  });

  it.each([
    [['--discovery-address', 'nope'], /--discovery-address: "nope" is not host:port/],
    [['--cooldown=-5'], /--cooldown: "-5" must be an integer >= 1/],
    [['--leader-elect', 'maybe'], /--leader-elect: "maybe" must be true or false/],
    [['--log-level', 'loud'], /--log-level: "loud" must be one of/],
    [['--no-such-flag', 'x'], /Unknown option '--no-such-flag'/],
  ])('rejects %j with a message naming the flag', (argv, message) => {
    expect(() => parseSettings(argv, {})).toThrow(SettingsError);
    expect(() => parseSettings(argv, {})).toThrow(message);
  });

  it('documents every flag in --help', () => {
    expect(parseSettings(['--help'], {})).toBe('help');
    for (const flag of [
      '--providers-config',
      '--discovery-address',
      '--metrics-address',
      '--leader-elect',
      '--log-level',
    ]) {
      expect(usage()).toContain(flag);
    }
  });
});

import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { DEMO_USAGE, demoArgs, type DemoArgs } from '../../cmd/demo/args.js';
import { portOr } from '../../cmd/demo/environment.js';

// Issue 26 item 9: `npm run demo -- --help` started a second demo; a second demo moved off
// port 8090 without a word.
describe('demoArgs', () => {
  it.each<[string[], DemoArgs]>([
    [[], { kind: 'run', wait: true, managedProxies: 1 }],
    [['--no-wait'], { kind: 'run', wait: false, managedProxies: 1 }],
    [['--help'], { kind: 'help' }],
    [['-h'], { kind: 'help' }],
    [['--no-wait', '--help'], { kind: 'help' }],
    [['--proxies', '3', '--help'], { kind: 'help' }],
    [['--port=1'], { kind: 'error', message: 'unknown argument "--port=1"' }],
    [['help'], { kind: 'error', message: 'unknown argument "help"' }],
  ])('%j → %j', (argv, expected) => {
    expect(demoArgs(argv)).toEqual(expected);
  });

  // Issue 49 item 5: a demo to test a client against: proxies, a token, a strict site.
  it.each<[string[], DemoArgs]>([
    [['--proxies', '3'], { kind: 'run', wait: true, managedProxies: 3 }],
    [['--proxies=20'], { kind: 'run', wait: true, managedProxies: 20 }],
    [['--token', 's3cr.t_~-X'], { kind: 'run', wait: true, managedProxies: 1, token: 's3cr.t_~-X' }],
    [['--token=abc'], { kind: 'run', wait: true, managedProxies: 1, token: 'abc' }],
    [['--site'], { kind: 'run', wait: true, managedProxies: 1, site: { ratePerSecond: 5 } }],
    [['--site-rate', '2'], { kind: 'run', wait: true, managedProxies: 1, site: { ratePerSecond: 2 } }],
    [['--site', '--site-rate=9'], { kind: 'run', wait: true, managedProxies: 1, site: { ratePerSecond: 9 } }],
    [
      ['--no-wait', '--token', 't', '--proxies', '3', '--site'],
      { kind: 'run', wait: false, managedProxies: 3, token: 't', site: { ratePerSecond: 5 } },
    ],
  ])('the new flags: %j → %j', (argv, expected) => {
    expect(demoArgs(argv)).toEqual(expected);
  });

  it.each<[string[], string]>([
    [['--proxies', '0'], '--proxies must be a whole number from 1 to 20, got "0"'],
    [['--proxies', '21'], '--proxies must be a whole number from 1 to 20, got "21"'],
    [['--proxies', '2.5'], '--proxies must be a whole number from 1 to 20, got "2.5"'],
    [['--proxies=three'], '--proxies must be a whole number from 1 to 20, got "three"'],
    [['--proxies=-1'], '--proxies must be a whole number from 1 to 20, got "-1"'],
    [['--proxies'], '--proxies needs a value'],
    [['--proxies', '--no-wait'], '--proxies needs a value'],
    [['--site-rate', '0'], '--site-rate must be a whole number from 1 to 1000, got "0"'],
    [['--site-rate=1001'], '--site-rate must be a whole number from 1 to 1000, got "1001"'],
    [['--site-rate'], '--site-rate needs a value'],
    [['--token'], '--token needs a value'],
    [['--token='], '--token must be letters, digits and . _ ~ - only, and not empty'],
    [['--token', "it's"], '--token must be letters, digits and . _ ~ - only, and not empty'],
    [['--token', 'a b'], '--token must be letters, digits and . _ ~ - only, and not empty'],
    [['--token', 'user@host'], '--token must be letters, digits and . _ ~ - only, and not empty'],
    [['--site=yes'], 'unknown argument "--site=yes"'],
  ])('rejects %j naming the flag: %s', (argv, message) => {
    expect(demoArgs(argv)).toEqual({ kind: 'error', message });
  });

  it('never echoes a bad token (it is a secret)', () => {
    const result = demoArgs(['--token', 'secret value']);
    expect(result.kind).toBe('error');
    expect(JSON.stringify(result)).not.toContain('secret');
  });

  it("the README's demo section names every flag the help lists", () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('## The local demo'));
    const flags = [...DEMO_USAGE.matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1]);
    expect(flags).toEqual(['--proxies', '--token', '--site', '--site-rate', '--no-wait', '--help']);
    for (const flag of flags.filter((f) => f !== '--help')) expect(section).toContain(`\`${flag}`);
  });

  it('the help names what it starts and its flags', () => {
    expect(DEMO_USAGE).toContain('127.0.0.1:8090');
    for (const flag of ['--no-wait', '--proxies <n>', '--token <t>', '--site ', '--site-rate <n>', '--help'])
      expect(DEMO_USAGE).toContain(flag);
  });
});

describe("the demo's ports", () => {
  let holder: Server;
  let taken: number;
  beforeAll(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    taken = (holder.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it('keeps a free preferred port without a word', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const free = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const warnings: string[] = [];
    expect(await portOr(free, 'the discovery API', (l) => warnings.push(l))).toBe(free);
    expect(warnings).toEqual([]);
  });

  it('moves off a taken port with a warning line naming both ports', async () => {
    const warnings: string[] = [];
    const port = await portOr(taken, 'the discovery API', (l) => warnings.push(l));
    expect(port).not.toBe(taken);
    expect(warnings).toEqual([
      `WARNING: port ${taken} is taken (another demo still running?): the discovery API listens on 127.0.0.1:${port} instead of 127.0.0.1:${taken}`,
    ]);
  });
});

import { createServer, type Server } from 'node:net';
import { DEMO_USAGE, demoArgs, type DemoArgs } from '../../cmd/demo/args.js';
import { portOr } from '../../cmd/demo/environment.js';

// Issue 26 item 9: `npm run demo -- --help` started a second demo; a second demo moved off
// port 8090 without a word.
describe('demoArgs', () => {
  it.each<[string[], DemoArgs]>([
    [[], { kind: 'run', wait: true }],
    [['--no-wait'], { kind: 'run', wait: false }],
    [['--help'], { kind: 'help' }],
    [['-h'], { kind: 'help' }],
    [['--no-wait', '--help'], { kind: 'help' }],
    [['--port=1'], { kind: 'error', message: 'unknown argument "--port=1"' }],
    [['help'], { kind: 'error', message: 'unknown argument "help"' }],
  ])('%j → %j', (argv, expected) => {
    expect(demoArgs(argv)).toEqual(expected);
  });

  it('the help names what it starts and its flags', () => {
    expect(DEMO_USAGE).toContain('127.0.0.1:8090');
    expect(DEMO_USAGE).toContain('--no-wait');
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

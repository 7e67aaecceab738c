// The MONITOR line parser the Redis cost tests count commands with: each line form Redis
// writes (a client's command, a script's call, escaped arguments) and what it means.
import { openMonitor, parseMonitorLine } from './redis-monitor.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

describe('parseMonitorLine', () => {
  it.each([
    [
      'a client command',
      '+1700000000.123456 [0 127.0.0.1:50000] "set" "k" "v"',
      { time: '1700000000.123456', source: '127.0.0.1:50000', args: ['set', 'k', 'v'] },
    ],
    [
      "a script's call",
      '+1700000000.5 [0 lua] "ZLEXCOUNT" "P:xip" "[1" "(2"',
      { time: '1700000000.5', source: 'lua', args: ['ZLEXCOUNT', 'P:xip', '[1', '(2'] },
    ],
    [
      'escaped quotes, backslashes, newlines and bytes',
      '+1.0 [3 127.0.0.1:1] "echo" "a\\"b\\\\c\\nd\\x01"',
      { time: '1.0', source: '127.0.0.1:1', args: ['echo', 'a"b\\c\nd\x01'] },
    ],
    ['an empty argument', '+1.0 [0 lua] "get" ""', { time: '1.0', source: 'lua', args: ['get', ''] }],
  ])('%s', (_name, line, expected) => {
    expect(parseMonitorLine(line)).toEqual(expected);
  });

  it.each([['+OK'], ['-ERR unknown'], ['']])('%j is no command', (line) => {
    expect(parseMonitorLine(line)).toBeUndefined();
  });
});

describe('openMonitor against a real redis-server', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it("sees a client's commands and a script's calls, arguments intact", async () => {
    const monitor = await openMonitor(server.port);
    const seen: Array<[string, string[]]> = [];
    monitor.on('monitor', (_time, args, source) => seen.push([source === 'lua' ? 'lua' : 'client', args]));
    const client = server.client();
    await client.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, 'k "1"', 'v\n2');
    await client.echo('end');
    const deadline = Date.now() + 5000;
    while (!seen.some(([, args]) => args[0] === 'echo') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    monitor.disconnect();
    expect(seen).toEqual(
      expect.arrayContaining([
        ['client', ['eval', "return redis.call('SET', KEYS[1], ARGV[1])", '1', 'k "1"', 'v\n2']],
        ['lua', ['SET', 'k "1"', 'v\n2']],
        ['client', ['echo', 'end']],
      ]),
    );
  });
});

import { Registry } from 'prom-client';
import { pino } from 'pino';
import {
  canonicalIP,
  echoURLProblem,
  exitIPDue,
  isPublicAddress,
  judgeExitIP,
  parseExitIP,
  type ExitIPReading,
} from '../../health/exit-ip.js';
import { HealthEngine } from '../../health/health-engine.js';
import { EXIT_IP_FAILURES_METRIC } from '../../health/health-metrics.js';
import type { ProbeOutcome } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { ControlledProber, failure, success } from './controlled-prober.js';
import { FakeClock } from './fake-clock.js';

describe('parseExitIP: what an echo service answered', () => {
  it.each([
    ['plain IPv4', '203.0.113.7', '203.0.113.7'],
    ['plain IPv4 with a newline (checkip.amazonaws.com)', '203.0.113.7\n', '203.0.113.7'],
    ['surrounding whitespace', '  203.0.113.7 \r\n', '203.0.113.7'],
    ['plain IPv6, canonicalized', '2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['IPv4-mapped IPv6 (a dual-stack server) as its IPv4', '::ffff:127.0.0.2', '127.0.0.2'],
    ['JSON {ip} (api.ipify.org?format=json)', '{"ip":"198.51.100.4"}', '198.51.100.4'],
    ['JSON {ip} IPv6', '{"ip": "2001:db8::2"}', '2001:db8::2'],
    ['JSON {origin} (httpbin.org/ip)', '{\n  "origin": "198.51.100.5"\n}\n', '198.51.100.5'],
  ])('%s', (_what, body, ip) => {
    expect(parseExitIP(body)).toEqual({ ok: true, ip });
  });

  it.each([
    ['empty', ''],
    ['a sentence', 'hello from the local target'],
    ['an HTML page', '<html><body>203.0.113.7</body></html>'],
    ['a host name', 'proxy.example.com'],
    ['two addresses (a proxy chain as httpbin writes it)', '{"origin": "198.51.100.5, 10.0.0.1"}'],
    ['JSON without ip', '{"address":"203.0.113.7"}'],
    ['JSON ip not a string', '{"ip": 42}'],
    ['broken JSON', '{"ip": "203.0.113.7"'],
    ['an IPv6 zone id', 'fe80::1%eth0'],
    ['an IPv4 with leading zeros', '127.000.000.001'],
    ['a CIDR', '203.0.113.0/24'],
  ])('refuses %s', (_what, body) => {
    expect(parseExitIP(body)).toEqual({
      ok: false,
      reason: 'NotAnIP',
      message: expect.stringContaining('not an IP'),
    });
  });

  it('quotes a long answer only in part', () => {
    const reading = parseExitIP('x'.repeat(500));
    expect(reading.ok).toBe(false);
    expect(!reading.ok && reading.message.length).toBeLessThan(200);
  });

  it.each([
    ['10.0.0.1', '10.0.0.1'],
    ['::1', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
    ['::ffff:a01:203', '10.1.2.3'],
    ['nonsense', undefined],
  ])('canonicalIP(%s) = %s', (text, expected) => {
    expect(canonicalIP(text)).toBe(expected);
  });

  it.each([
    ['never read', undefined, 1_000, true],
    ['read just now', 1_000, 1_000, false],
    ['read less than the refresh ago', 1_000, 60_999, false],
    ['read exactly the refresh ago', 1_000, 61_000, true],
  ])('exitIPDue: %s', (_what, lastReadAt, now, due) => {
    expect(exitIPDue(lastReadAt, now, 60_000)).toBe(due);
  });
});

/** A ControlledProber that also answers exit IP reads from a script. */
class ExitIPProber extends ControlledProber {
  reads: string[] = [];
  exitAnswer: ExitIPReading = { ok: true, ip: '203.0.113.7' };

  async readExitIP(target: ProbeTarget): Promise<ExitIPReading> {
    this.reads.push(target.key);
    return this.exitAnswer;
  }
}

describe('HealthEngine exit IP reads', () => {
  const target = (overrides: Partial<ProbeTarget> = {}): ProbeTarget => ({
    key: 'ns/p',
    host: '10.0.0.1',
    port: 3128,
    probeURL: 'https://probe.example/generate_204',
    exitIPURL: 'https://echo.example/ip',
    intervalSeconds: 10,
    timeoutSeconds: 5,
    failureThreshold: 1,
    successThreshold: 1,
    expectedStatusCodes: [204],
    ...overrides,
  });

  function setup(answer: () => ProbeOutcome = () => success(), allowNonPublic = false) {
    const clock = new FakeClock();
    const prober = new ExitIPProber(() => clock.now());
    prober.answer = answer;
    const registry = new Registry();
    const engine = new HealthEngine({
      logger: pino({ level: 'silent' }),
      registry,
      clock,
      prober,
      jitter: 0,
      random: () => 0,
      exitIPRefreshMillis: 60_000,
      exitIPPolicy: { allowNonPublic },
    });
    const changes: string[] = [];
    engine.onExitIP((_key, ip) => changes.push(ip));
    engine.start();
    return { clock, prober, engine, registry, changes };
  }

  it('reads at the first successful probe, then at most once a refresh, and reports only changes', async () => {
    const { clock, prober, engine, changes } = setup();
    engine.upsert(target());
    await clock.advance(1);
    expect([prober.reads.length, changes]).toEqual([1, ['203.0.113.7']]);
    expect(engine.exitIP('ns/p')).toBe('203.0.113.7');
    await clock.advance(50_000); // five more probes, no read
    expect(prober.reads.length).toBe(1);
    await clock.advance(10_000); // the probe at 60 s reads again: the same address, no report
    expect([prober.reads.length, changes]).toEqual([2, ['203.0.113.7']]);
    prober.exitAnswer = { ok: true, ip: '198.51.100.9' };
    await clock.advance(60_000);
    expect([prober.reads.length, changes]).toEqual([3, ['203.0.113.7', '198.51.100.9']]);
  });

  it('a failed read keeps the last exit IP and the verdict healthy, and is counted by reason', async () => {
    const { clock, prober, engine, registry, changes } = setup();
    engine.upsert(target());
    await clock.advance(1);
    prober.exitAnswer = { ok: false, reason: 'RequestFailed', message: 'connect ECONNREFUSED' };
    await clock.advance(60_000);
    expect(prober.reads.length).toBe(2);
    expect(changes).toEqual(['203.0.113.7']);
    expect(engine.exitIP('ns/p')).toBe('203.0.113.7');
    expect(engine.verdict('ns/p')?.healthy).toBe(true);
    const metric = await registry.getSingleMetric(EXIT_IP_FAILURES_METRIC)!.get();
    expect(metric.values).toEqual([
      expect.objectContaining({ labels: { reason: 'RequestFailed' }, value: 1 }),
    ]);
  });

  it('never reads through a failing proxy nor without exitIPURL', async () => {
    const failing = setup(() => failure());
    failing.engine.upsert(target());
    await failing.clock.advance(30_000);
    expect(failing.prober.reads).toEqual([]);
    const unset = setup();
    unset.engine.upsert(target({ exitIPURL: undefined }));
    await unset.clock.advance(30_000);
    expect(unset.prober.reads).toEqual([]);
  });

  it('a new endpoint forgets the exit IP and reads at once; a new exitIPURL reads at once', async () => {
    const { clock, prober, engine, changes } = setup();
    engine.upsert(target());
    await clock.advance(1);
    engine.upsert(target({ exitIPURL: 'https://other-echo.example/' }));
    await clock.advance(10_000);
    expect(prober.reads.length).toBe(2);
    engine.upsert(target({ host: '10.0.0.2', exitIPURL: 'https://other-echo.example/' }));
    expect(engine.exitIP('ns/p')).toBeUndefined();
    await clock.advance(10_000);
    expect(prober.reads.length).toBe(3);
    // The same address through the new endpoint is reported again: the old one was forgotten.
    expect(changes).toEqual(['203.0.113.7', '203.0.113.7']);
  });
});

describe('isPublicAddress: what an echo on the internet could have seen (issue 44 item 4)', () => {
  it.each([
    ['203.0.114.7', true],
    ['8.8.8.8', true],
    ['2606:4700::1111', true],
    ['127.0.0.2', false],
    ['10.1.2.3', false],
    ['172.20.0.1', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['224.0.0.1', false],
    ['255.255.255.255', false],
    ['192.0.2.1 (documentation: a stand-in for the internet)', true],
    ['198.51.100.4', true],
    ['203.0.113.7', true],
    ['::1', false],
    ['::', false],
    ['fd00::1', false],
    ['fe80::1', false],
    ['ff02::1', false],
    ['2001:db8::1', true],
    ['not an address', false],
  ])('%s → %s', (ip, want) => {
    expect(isPublicAddress(ip.split(' ')[0])).toBe(want);
  });
});

describe('the echo answer is refused with a reason unless the proxy could not have forged it', () => {
  const strict = { allowNonPublic: false };
  const loose = { allowNonPublic: true };
  it.each<[string, string, string, typeof strict, string | undefined]>([
    ['https to another host: trusted', 'https://echo.example/ip', '10.0.0.1', strict, undefined],
    ['plain http: the proxy answers it itself', 'http://echo.example/ip', '10.0.0.1', strict, 'Forgeable'],
    ['plain http, allowed for tests', 'http://127.0.0.1:8080/ip', '127.0.0.10', loose, undefined],
    ["https at the proxy's own address", 'https://10.0.0.1/ip', '10.0.0.1', strict, 'Forgeable'],
    ["the proxy's own address, even allowed", 'http://127.0.0.10:3128/ip', '127.0.0.10', loose, 'Forgeable'],
    ["the proxy's own IPv6 address", 'https://[2001:db8::7]/ip', '2001:DB8::7', strict, 'Forgeable'],
  ])('%s', (_what, url, host, policy, want) => {
    expect(echoURLProblem(url, host, policy)?.reason).toBe(want);
  });

  it.each<[string, ExitIPReading, typeof strict, string | undefined]>([
    ['a public address', { ok: true, ip: '8.8.4.4' }, strict, undefined],
    ['a private address', { ok: true, ip: '10.0.0.9' }, strict, 'NotPublic'],
    ['loopback', { ok: true, ip: '127.0.0.10' }, strict, 'NotPublic'],
    ['loopback, allowed for tests', { ok: true, ip: '127.0.0.10' }, loose, undefined],
    ['a failed read stays what it was', { ok: false, reason: 'NotAnIP', message: 'm' }, strict, 'NotAnIP'],
  ])('%s', (_what, reading, policy, want) => {
    const judged = judgeExitIP(reading, policy);
    expect(judged.ok ? undefined : judged.reason).toBe(want);
  });
});

describe('HealthEngine refuses exit IPs the proxy could have forged or no internet echo could see', () => {
  const target = (overrides: Partial<ProbeTarget> = {}): ProbeTarget => ({
    key: 'ns/p',
    host: '10.0.0.1',
    port: 3128,
    probeURL: 'https://probe.example/generate_204',
    exitIPURL: 'https://echo.example/ip',
    intervalSeconds: 10,
    timeoutSeconds: 5,
    failureThreshold: 1,
    successThreshold: 1,
    expectedStatusCodes: [204],
    ...overrides,
  });
  function setup(allowNonPublic: boolean) {
    const clock = new FakeClock();
    const prober = new ExitIPProber(() => clock.now());
    prober.answer = () => success();
    const registry = new Registry();
    const engine = new HealthEngine({
      logger: pino({ level: 'silent' }),
      registry,
      clock,
      prober,
      jitter: 0,
      random: () => 0,
      exitIPRefreshMillis: 60_000,
      exitIPPolicy: { allowNonPublic },
    });
    const changes: string[] = [];
    engine.onExitIP((_key, ip) => changes.push(ip));
    engine.start();
    return { clock, prober, engine, registry, changes };
  }
  const failures = async (registry: Registry) =>
    (await registry.getSingleMetric(EXIT_IP_FAILURES_METRIC)!.get()).values.map((v) => [
      v.labels.reason,
      v.value,
    ]);

  it('a private answer is refused (NotPublic) and reported to nobody; allowed, it is reported', async () => {
    const strict = setup(false);
    strict.prober.exitAnswer = { ok: true, ip: '192.168.7.7' };
    strict.engine.upsert(target());
    await strict.clock.advance(1);
    expect(strict.changes).toEqual([]);
    expect(strict.engine.exitIP('ns/p')).toBeUndefined();
    expect(await failures(strict.registry)).toEqual([['NotPublic', 1]]);
    const loose = setup(true);
    loose.prober.exitAnswer = { ok: true, ip: '192.168.7.7' };
    loose.engine.upsert(target());
    await loose.clock.advance(1);
    expect(loose.changes).toEqual(['192.168.7.7']);
  });

  it('a plain-http echo is never asked (Forgeable): nothing goes through the proxy for it', async () => {
    const { clock, prober, engine, registry, changes } = setup(false);
    engine.upsert(target({ exitIPURL: 'http://echo.example/ip' }));
    await clock.advance(1);
    expect(prober.reads).toEqual([]);
    expect(changes).toEqual([]);
    expect(await failures(registry)).toEqual([['Forgeable', 1]]);
  });

  it('a new instance at the same address is a new endpoint: its exit IP is read afresh', async () => {
    const { clock, prober, engine, changes } = setup(false);
    engine.upsert(target({ instance: 'i-1' }));
    await clock.advance(1);
    engine.upsert(target({ instance: 'i-2' }));
    expect(engine.exitIP('ns/p')).toBeUndefined();
    await clock.advance(10_000);
    expect(prober.reads.length).toBe(2);
    expect(changes).toEqual(['203.0.113.7', '203.0.113.7']);
  });
});

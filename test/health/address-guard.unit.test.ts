// The prober's address guard (issue 44 item 5): a guarded (External) target's proxy is
// connected to only at an address the guard accepts. A literal address is checked before the
// connection; a name's addresses inside the lookup the connection uses, so the address checked
// is the address connected to (a name that answers a public address once and an inside one
// next, DNS rebinding, never gets a connection inside). Real sockets on loopback.
import { SocketProber } from '../../health/socket-prober.js';
import { ProbeReason } from '../../health/probe-reason.js';
import type { ProbeTarget } from '../../health/probe-target.js';
import { classifyProbeError } from '../../health/classify-probe-error.js';
import { TestForwardProxy } from './forward-proxy.js';
import { startHttpTarget, type TestTarget } from './targets.js';

describe('the prober connects to a guarded target only where its guard allows', () => {
  let httpTarget: TestTarget;
  let proxy: TestForwardProxy;
  /** Every address the guard was asked about, in order. */
  const asked: string[] = [];
  const refuseLoopback = (address: string): string | undefined => {
    asked.push(address);
    return address.startsWith('127.') || address === '::1'
      ? `${address} is in the loopback range`
      : undefined;
  };
  const allowAll = (address: string): string | undefined => {
    asked.push(address);
    return undefined;
  };

  beforeAll(async () => {
    httpTarget = await startHttpTarget();
    proxy = await TestForwardProxy.start('healthy');
  });
  afterAll(async () => {
    await Promise.all([proxy.close(), httpTarget.close()]);
  });
  beforeEach(() => {
    asked.length = 0;
    proxy.connections = 0;
  });

  const target = (host: string, overrides: Partial<ProbeTarget> = {}): ProbeTarget => ({
    key: `test/${host}`,
    host,
    port: proxy.port,
    probeURL: httpTarget.url,
    intervalSeconds: 10,
    timeoutSeconds: 2,
    failureThreshold: 1,
    successThreshold: 1,
    expectedStatusCodes: [204, 200],
    guarded: true,
    ...overrides,
  });

  async function probe(guard: ((a: string) => string | undefined) | undefined, t: ProbeTarget) {
    const prober = new SocketProber(guard ? { addressGuard: guard } : {});
    try {
      return await prober.probe(t, new AbortController().signal);
    } finally {
      await prober.close();
    }
  }

  it('refuses a literal address before connecting: EndpointRefused, no connection', async () => {
    const outcome = await probe(refuseLoopback, target('127.0.0.1'));
    expect(outcome).toMatchObject({
      success: false,
      reason: ProbeReason.EndpointRefused,
      message: 'endpoint refused: 127.0.0.1 is in the loopback range',
    });
    expect(asked).toEqual(['127.0.0.1']);
    expect(proxy.connections).toBe(0);
  });

  it('checks what a name resolves to, not the name: localhost resolves to loopback and is refused', async () => {
    const outcome = await probe(refuseLoopback, target('localhost'));
    expect(outcome.reason).toBe(ProbeReason.EndpointRefused);
    expect(outcome.message).toMatch(/^endpoint refused: localhost resolves to (127\.0\.0\.1|::1): /);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((a) => a === '::1' || a.startsWith('127.'))).toBe(true);
    expect(proxy.connections).toBe(0);
  });

  it('connects to the checked address when the guard allows it (the lookup still answers)', async () => {
    const outcome = await probe(allowAll, target('localhost'));
    expect(outcome).toMatchObject({ success: true, reason: ProbeReason.ProbeSucceeded });
    expect(asked.length).toBeGreaterThan(0);
    expect(proxy.connections).toBe(1);
  });

  it('leaves an unguarded target (a provider’s instance) alone', async () => {
    const outcome = await probe(refuseLoopback, target('127.0.0.1', { guarded: false }));
    expect(outcome.success).toBe(true);
    expect(asked).toEqual([]);
    expect(proxy.connections).toBe(1);
  });

  it('refuses a guarded target when no guard is configured: never probed unchecked', async () => {
    const outcome = await probe(undefined, target('127.0.0.1'));
    expect(outcome.reason).toBe(ProbeReason.EndpointRefused);
    expect(proxy.connections).toBe(0);
  });

  it('refuses the exit IP read through a refused endpoint too', async () => {
    const prober = new SocketProber({ addressGuard: refuseLoopback });
    try {
      const reading = await prober.readExitIP(
        target('localhost', { exitIPURL: `${httpTarget.url}` }),
        new AbortController().signal,
      );
      expect(reading).toMatchObject({ ok: false, message: expect.stringContaining('endpoint refused') });
    } finally {
      await prober.close();
    }
    expect(proxy.connections).toBe(0);
  });

  it('classifies a refusal wrapped in another error as EndpointRefused', () => {
    const inner = Object.assign(new Error('endpoint refused: x'), { code: 'ERR_PROBE_ADDRESS_REFUSED' });
    expect(classifyProbeError(new Error('outer', { cause: inner }), false)).toEqual({
      reason: ProbeReason.EndpointRefused,
      message: 'endpoint refused: x',
    });
  });
});

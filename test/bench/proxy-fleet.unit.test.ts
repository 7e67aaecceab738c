import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fetch, ProxyAgent } from 'undici';
import { selfSignedCert } from '../../framework/testing/self-signed-cert.js';
import { runFleet, startFleet, type RunningFleet } from '../../bench/proxy-fleet.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cert = selfSignedCert();

/** The probe through one proxy of the fleet: the target's status, or the proxy's refusal. */
async function probe(port: number, url: string): Promise<string> {
  const dispatcher = new ProxyAgent({ uri: `http://127.0.0.1:${port}`, requestTls: { ca: cert.cert } });
  try {
    return String((await fetch(url, { dispatcher })).status);
  } catch (err) {
    // undici wraps the proxy's refusal: its status is in one of the causes.
    const messages: string[] = [];
    for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
      messages.push(String(e.message));
    return messages.join(' <- ');
  } finally {
    await dispatcher.close();
  }
}

describe("the benchmarks' proxy fleet", () => {
  let fleet: RunningFleet;
  beforeAll(async () => {
    fleet = await runFleet({ cert, count: 3, flakyFraction: 1 / 3, flapSeconds: 3600 });
  });
  afterAll(() => fleet.close());

  it('gives every proxy a loopback port and the https target through each', async () => {
    expect(fleet.ports).toHaveLength(3);
    expect(new Set(fleet.ports).size).toBe(3);
    expect(fleet.probeURL).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/generate_204$/);
    expect(await Promise.all(fleet.ports.map((p) => probe(p, fleet.probeURL)))).toEqual([
      '204',
      '204',
      '204',
    ]);
  });

  it('flaps the flaky share of the proxies: they refuse CONNECT with 502 until the next flap', async () => {
    fleet.flap();
    const [flaky, steady] = await Promise.all(fleet.ports.slice(0, 2).map((p) => probe(p, fleet.probeURL)));
    expect(flaky).toMatch(/502/);
    expect(steady).toBe('204');
    fleet.flap();
    expect(await probe(fleet.ports[0], fleet.probeURL)).toBe('204');
  });

  it('runs in a child process the parent starts and ends by disconnecting', async () => {
    const { child, fleet: forked } = await startFleet({ cert, count: 2 });
    try {
      expect(child.pid).not.toBe(process.pid);
      expect(await probe(forked.ports[1], forked.probeURL)).toBe('204');
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.disconnect();
      expect(await exited).toBe(0);
    }
  });

  it.each(['bench/health.ts', 'bench/memory.ts'])(
    '%s starts this fleet and serves no proxy of its own',
    (file) => {
      const text = readFileSync(`${root}${file}`, 'utf8');
      expect(text).toContain("from './proxy-fleet.js'");
      expect(text).not.toMatch(/createServer\(/);
    },
  );
});

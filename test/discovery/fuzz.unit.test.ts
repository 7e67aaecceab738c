// Thousands of random and malformed requests: the server never answers 5xx and keeps
// serving. Seeded, so a failure reproduces: the seed is in the test name.
import { connect } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { startHarness, type Harness } from './api-harness.js';
import { proxy } from '../book/fixtures.js';
import { seededRandom as prng } from '../harness/seeded-random.js';

const SEED = 0x5eed;
const REQUESTS = 2000;
// Bounded by count; the generous timeout only absorbs a loaded CI machine.
const TIMEOUT_MS = 120_000;
const RAW_CONNECTIONS = 60;
const TOKEN = 'fuzz-token';

class Fuzzer {
  constructor(private readonly random: () => number) {}
  int(max: number): number {
    return Math.floor(this.random() * max);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
  chance(p: number): boolean {
    return this.random() < p;
  }
  bytes(length: number): Buffer {
    return Buffer.from(Array.from({ length }, () => this.int(256)));
  }
  /** Junk that is still a legal request-target: anything outside visible ASCII is escaped. */
  pathJunk(length: number): string {
    return this.junk(length).replace(/[^\x21-\x7e]|#/g, (c) => encodeURIComponent(c));
  }
  junk(length: number): string {
    const alphabet = 'abcXYZ019-_.~%/?&=#:@!$()*+,;[]{}|\\^`"\'<> \t';
    return Array.from({ length }, () => this.pick([...alphabet])).join('');
  }
  json(depth = 0): unknown {
    switch (this.int(depth > 3 ? 5 : 7)) {
      case 0:
        return null;
      case 1:
        return this.chance(0.5);
      case 2:
        return this.pick([0, -1, 1.5, 3600, 3601, 1e308, -0, 300, Number.MAX_SAFE_INTEGER]);
      case 3:
        return this.pick(['', 'ok', 'banned', 'rate_limited', 'example.com', this.junk(this.int(40))]);
      case 4:
        return this.junk(5);
      case 5:
        return Array.from({ length: this.int(4) }, () => this.json(depth + 1));
      default: {
        const keys = [
          'selector',
          'ttlSeconds',
          'target',
          'result',
          'geo',
          '__proto__',
          'constructor',
          this.junk(4),
        ];
        return Object.fromEntries(
          Array.from({ length: this.int(5) }, () => [this.pick(keys), this.json(depth + 1)]),
        );
      }
    }
  }
}

function randomRequest(f: Fuzzer, leaseIDs: string[]): Dispatcher.RequestOptions {
  const id = f.chance(0.5) && leaseIDs.length > 0 ? f.pick(leaseIDs) : encodeURIComponent(f.junk(f.int(20)));
  const paths = [
    '/v1/proxies',
    `/v1/proxies?${f.pick(['attr.geo=eu', 'healthy=true', 'healthy=maybe', 'attr.=x', 'attr.geo=eu&attr.geo=us', f.pathJunk(30)])}`,
    '/v1/leases',
    `/v1/leases/${id}`,
    `/v1/leases/${id}/report`,
    '/openapi.json',
    `/${f.pathJunk(f.int(60))}`,
    `/v1/leases/%${f.pick(['', 'E0%A4%A', 'zz', '00', 'FF'])}`,
    `/v1/${'a/'.repeat(f.int(500))}`,
  ];
  const method = f.pick([
    'GET',
    'POST',
    'POST',
    'POST',
    'DELETE',
    'PUT',
    'PATCH',
    'HEAD',
    'OPTIONS',
    'PROPFIND',
    'FOO',
  ]);
  const headers: Record<string, string> = {};
  if (f.chance(0.85)) headers.authorization = `Bearer ${TOKEN}`;
  else if (f.chance(0.5))
    headers.authorization = f.pick([
      'Bearer',
      'Bearer ',
      'Basic abc',
      `Bearer ${f.junk(10)}`,
      `bearer   ${TOKEN}`,
    ]);
  if (f.chance(0.8)) {
    headers['content-type'] = f.pick([
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=utf-16',
      'application/json; charset=bogus',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      f.junk(12).replace(/[^\x21-\x7e]/g, 'x'),
    ]);
  }
  if (f.chance(0.05)) headers['content-encoding'] = f.pick(['gzip', 'deflate', 'br', 'identity', 'bogus']);
  let body: string | Buffer | undefined;
  if (method !== 'GET' && method !== 'HEAD') {
    switch (f.int(6)) {
      case 0:
        break;
      case 1:
        body = JSON.stringify(f.json());
        break;
      case 2:
        body = JSON.stringify({
          selector: f.chance(0.5) ? {} : f.json(),
          ttlSeconds: f.json(),
          target: f.json(),
        });
        break;
      case 3:
        body = JSON.stringify({
          result: f.pick(['ok', 'banned', 'rate_limited', 'x']),
          target: f.json(),
        }).slice(0, f.int(50));
        break;
      case 4:
        body = f.bytes(f.int(200));
        break;
      default:
        body = f.chance(0.5)
          ? 'x'.repeat(16 * 1024 + f.int(100_000))
          : JSON.stringify({ selector: { k: 'v'.repeat(20_000) } });
    }
  }
  return { path: f.pick(paths), method, headers, body };
}

/** Writes bytes that are not valid HTTP and returns the status line's code, if any. */
function rawExchange(port: number, payload: Buffer): Promise<number | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(received);
      resolve(match ? Number(match[1]) : undefined);
    });
    socket.end(payload);
  });
}

describe(`fuzzing the discovery API (seed ${SEED})`, () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      token: TOKEN,
      proxies: [
        proxy('ns/a', { maxLeases: 3, attributes: { geo: 'eu' } }),
        proxy('ns/b', { maxLeases: 2, attributes: { geo: 'us' } }),
        proxy('ns/c', { healthy: false }),
      ],
    });
  });
  afterAll(async () => {
    await h.stop();
  });

  it(
    `answers ${REQUESTS} random requests without a single 5xx, then still serves`,
    async () => {
      const f = new Fuzzer(prng(SEED));
      const pool = new Pool(h.baseURL, { connections: 16 });
      const leaseIDs: string[] = [];
      const statuses = new Map<number, number>();
      const serverErrors: string[] = [];
      const clientFailures: string[] = [];
      let transportErrors = 0;
      let next = 0;
      const worker = async () => {
        while (next < REQUESTS) {
          next++;
          const options = randomRequest(f, leaseIDs);
          try {
            const response = await pool.request(options);
            const text = await response.body.text();
            statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
            if (response.statusCode >= 500)
              serverErrors.push(`${options.method} ${options.path} → ${response.statusCode} ${text}`);
            if (response.statusCode === 201) leaseIDs.push((JSON.parse(text) as { leaseID: string }).leaseID);
          } catch (err) {
            // The server may cut an upload it refused (413) before the client finishes sending;
            // any other failure is a finding.
            transportErrors++;
            const size =
              typeof options.body === 'string' || Buffer.isBuffer(options.body) ? options.body.length : 0;
            if (size <= 16 * 1024)
              clientFailures.push(`${options.method} ${options.path}: ${(err as Error).message}`);
          }
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      await pool.close();

      expect(serverErrors).toEqual([]);
      expect(clientFailures).toEqual([]);
      expect(transportErrors).toBeLessThan(REQUESTS * 0.05);
      expect(statuses.get(201) ?? 0).toBeGreaterThan(0);
      expect([...statuses.keys()].every((status) => status >= 200 && status < 500)).toBe(true);
      for (const [id, cap] of [
        ['ns/a', 3],
        ['ns/b', 2],
        ['ns/c', 0],
      ] as const) {
        expect(await h.activeLeases(id)).toBeLessThanOrEqual(cap);
      }
      const after = await h.call('GET', '/v1/proxies', { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(after.status).toBe(200);
    },
    TIMEOUT_MS,
  );

  it(`survives ${RAW_CONNECTIONS} connections of bytes that are not HTTP, then still serves`, async () => {
    const f = new Fuzzer(prng(SEED + 1));
    const payloads = Array.from({ length: RAW_CONNECTIONS }, (_, i) =>
      i % 3 === 0
        ? Buffer.from(`GET /v1/proxies HTTP/1.1\r\nHost: x\r\nContent-Length: ${f.junk(3)}\r\n\r\n`)
        : i % 3 === 1
          ? Buffer.from(`${f.junk(8)} ${f.junk(20)} HTTP/9.9\r\n${'X: y\r\n'.repeat(f.int(50))}\r\n`)
          : f.bytes(1 + f.int(2000)),
    );
    const statuses = await Promise.all(payloads.map((payload) => rawExchange(h.server.port, payload)));
    expect(statuses.filter((status) => status !== undefined && status >= 500)).toEqual([]);
    const after = await h.call('GET', '/v1/proxies', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(after.status).toBe(200);
  });
});

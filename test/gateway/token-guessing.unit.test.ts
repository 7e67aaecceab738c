// The gateway takes the discovery API's tokens as proxy passwords, so it is a second door to
// guess them at: failed authentications are limited per source address there too, before the
// presented token is hashed (20 at once, then 5/s: the API's limits), on every path that takes
// a token. A missing header still gets its 407 challenge, and a token already seen valid from
// the address still passes.
import { request as httpRequest } from 'node:http';
import { basic, startWorld, viaGateway, viaTunnel, type Answer, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

const url = (w: World) => `http://127.0.0.1:${w.site.httpPort}/`;
const WRONG = (i: number) => `wrong-token-guess-${String(i).padStart(6, '0')}`;

/** POST a report by session (the gateway's own route) with a bearer token. */
function reportWithBearer(port: number, token: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/sessions/s1/report',
        agent: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ target: 'example.com', result: 'banned' }));
  });
}

/** 20 wrong guesses (the burst): each a 407 invalid_token. */
async function spendTheBurst(w: World): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const answer = await viaGateway(w.port, url(w), basic('session-s', WRONG(i)));
    expect([answer.status, answer.headers['x-gateway-error']]).toEqual([
      407,
      'invalid_token: the password is not a discovery API token',
    ]);
  }
}

describe('guessing tokens at the gateway', () => {
  it.each<[string, (w: World) => Promise<Answer>]>([
    ['a plain HTTP request', (w) => viaGateway(w.port, url(w), basic('session-s', WRONG(99)))],
    ['a CONNECT', (w) => viaTunnel(w.port, w.site.httpsPort, w.site.ca, basic('session-s', WRONG(99)))],
    ['a report by session with a bearer token', (w) => reportWithBearer(w.port, WRONG(99))],
  ])('after 20 wrong tokens, %s with another wrong one is 429 with Retry-After', async (_case, guess) => {
    world = await startWorld();
    await spendTheBurst(world);
    const answer = await guess(world);
    expect(answer.status).toBe(429);
    expect(answer.body).toContain('too_many_requests');
    expect(answer.body).not.toContain(WRONG(99));
    expect(Number(answer.headers['retry-after'] ?? 1)).toBeGreaterThanOrEqual(1);
  });

  it('refuses the next guesses for as long as they keep coming: 200 guesses, 20 checked', async () => {
    world = await startWorld();
    const statuses = new Map<number, number>();
    for (let i = 0; i < 200; i++) {
      const { status } = await viaGateway(world.port, url(world), basic('session-s', WRONG(i)));
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
    // Without the limit: 200 answers of 407, every token hashed and checked.
    expect(statuses.get(407) ?? 0).toBeLessThanOrEqual(25);
    expect((statuses.get(407) ?? 0) + (statuses.get(429) ?? 0)).toBe(200);
  });

  it('a token seen valid from the address still passes while its guesses are refused', async () => {
    world = await startWorld();
    expect((await viaGateway(world.port, url(world), basic('session-s'))).status).toBe(200);
    await spendTheBurst(world);
    expect((await viaGateway(world.port, url(world), basic('session-s', WRONG(99)))).status).toBe(429);
    expect((await viaGateway(world.port, url(world), basic('session-s'))).status).toBe(200);
  });

  it('a request without credentials still gets its 407 challenge (browsers send them only then)', async () => {
    world = await startWorld();
    await spendTheBurst(world);
    const answer = await viaGateway(world.port, url(world), undefined);
    expect([answer.status, answer.headers['proxy-authenticate']]).toEqual([
      407,
      'Basic realm="proxy-operator gateway"',
    ]);
  });
});

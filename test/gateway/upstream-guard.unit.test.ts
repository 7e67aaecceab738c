// The gateway never connects to a leased External proxy whose address the providers config
// refuses (issue 44 item 5), on real parts (gateway-world.ts): the real gateway, real forward
// proxies on 127.0.0.x, the memory lease book, and the guard handlers/ wires in production
// (gatewayGuard: the providers config's rule through the health engine's guarded lookup). Only
// name resolution is the test's own: a name that answered a public address at its probe and
// now answers the loopback address its proxy listens on (DNS rebinding). No packet leaves the
// machine: the public address is resolved, never connected to.
import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { gatewayGuard } from '../../handlers/gateway-guard.js';
import type { Resolve } from '../../health/index.js';
import { upstreamConnect } from '../../gateway/upstream-guard.js';
import type { Upstream, UpstreamGuard } from '../../gateway/ports.js';
import {
  DEFAULT_EXTERNAL_ENDPOINTS,
  type ExternalEndpointSettings,
} from '../../providers/endpoint-ranges.js';
import { basic, PROXY_IPS, startWorld, viaGateway, viaTunnel, type World } from './gateway-world.js';

const REBOUND = 'rebound.proxies.test';
const PUBLIC = '203.0.113.10';
const LOOPBACK_ALLOWED: ExternalEndpointSettings = {
  ...DEFAULT_EXTERNAL_ENDPOINTS,
  allowRanges: ['loopback'],
};

/** REBOUND answers `answer()`; every other name is unknown. Counts the gateway's questions. */
function resolver(answer: () => string): Resolve & { asked: number } {
  const resolve = ((hostname, _options, callback) => {
    resolve.asked++;
    if (hostname !== REBOUND)
      return callback(
        Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }),
        [],
      );
    callback(null, [{ address: answer(), family: 4 }]);
  }) as Resolve & { asked: number };
  resolve.asked = 0;
  return resolve;
}

function lookupOnce(lookup: LookupFunction, host: string): Promise<string> {
  return new Promise((resolve, reject) =>
    lookup(host, { all: true }, (err, addresses) =>
      err ? reject(err) : resolve((addresses as unknown as LookupAddress[])[0]!.address),
    ),
  );
}

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

const url = (w: World) => `http://127.0.0.1:${w.site.httpPort}/`;

/** Plain HTTP and CONNECT through the gateway, each on its own session (spread over the proxies). */
async function traffic(w: World, n = 6): Promise<Array<{ status: number; body: string }>> {
  const answers = [];
  for (let i = 0; i < n; i++) {
    answers.push(await viaGateway(w.port, url(w), basic(`session-h${i}`)));
    answers.push(await viaTunnel(w.port, w.site.httpsPort, w.site.ca, basic(`session-t${i}`)));
  }
  return answers;
}

describe('a leased External proxy whose name now resolves inside (DNS rebinding)', () => {
  it('gets 0 connections through the gateway: every request is served by another proxy', async () => {
    let rebound = false;
    const resolve = resolver(() => (rebound ? PROXY_IPS[0]! : PUBLIC));
    const guard = gatewayGuard(DEFAULT_EXTERNAL_ENDPOINTS, resolve);
    // Its probe's lookup saw a public address: the guard let it through, so it is leased.
    await expect(lookupOnce(guard.lookup, REBOUND)).resolves.toBe(PUBLIC);
    rebound = true;
    world = await startWorld({}, 20, undefined, { guard, names: { [PROXY_IPS[0]!]: REBOUND } });
    const answers = await traffic(world);

    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(answers.map((a) => a.body.trim())).not.toContain(PROXY_IPS[0]);
    const stats = world.proxies.get(PROXY_IPS[0]!)!.stats;
    expect({ connects: stats.connects, requests: stats.requests }).toEqual({ connects: 0, requests: 0 });
    expect(world.site.seen).not.toContain(PROXY_IPS[0]);
    // It was leased and its name resolved for a connection, which the guard refused.
    expect(resolve.asked).toBeGreaterThan(1);
  });

  it('the same name is connected to when the providers config allows loopback (the control)', async () => {
    const resolve = resolver(() => PROXY_IPS[0]!);
    const guard = gatewayGuard(LOOPBACK_ALLOWED, resolve);
    world = await startWorld({}, 20, undefined, { guard, names: { [PROXY_IPS[0]!]: REBOUND } });
    const answers = await traffic(world);

    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(answers.map((a) => a.body.trim())).toContain(PROXY_IPS[0]);
    expect(world.proxies.get(PROXY_IPS[0]!)!.stats.connects).toBeGreaterThan(0);
  });

  it.each(['http', 'tunnel'])(
    'when every proxy is refused, %s: 502 upstream_failed naming the refusal, not the address; nothing is sent',
    async (carrier) => {
      const guard = gatewayGuard(
        DEFAULT_EXTERNAL_ENDPOINTS,
        resolver(() => PROXY_IPS[0]!),
      );
      // Every record is the External name: each attempt's lease is refused before connecting.
      world = await startWorld({}, 5, undefined, {
        guard,
        names: Object.fromEntries(PROXY_IPS.map((ip) => [ip, REBOUND])),
      });
      const answer =
        carrier === 'http'
          ? await viaGateway(world.port, url(world), basic(''))
          : await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
      expect(answer.status).toBe(502);
      // The client learns that the address rule refused the endpoint, never which address:
      // the proxy's name and what it resolves to are the gateway log's alone.
      expect(JSON.parse(answer.body)).toEqual({
        error: 'upstream_failed',
        message: expect.stringContaining("endpoint refused by the providers config's address rule"),
      });
      expect(answer.body).not.toMatch(/rebound|127\.0\.0\.2|proxies\.test/);
      for (const fp of world.proxies.values()) expect(fp.stats.connects + fp.stats.requests).toBe(0);
      expect(world.site.seen).toEqual([]);
      // Each was reported unreachable: the book holds it out until its re-probe (through the
      // same guard) says EndpointRefused, or healthy again once its name is public again.
      const next = await viaGateway(world.port, url(world), basic(''));
      expect([next.status, JSON.parse(next.body).error]).toEqual([503, 'no_match']);
    },
  );
});

describe('upstreamConnect: whether and how the gateway connects to an upstream', () => {
  const guard: UpstreamGuard = gatewayGuard(
    DEFAULT_EXTERNAL_ENDPOINTS,
    resolver(() => PUBLIC),
  );
  const up = (host: string, guarded?: boolean): Upstream => ({
    id: 'fleet/p',
    host,
    port: 3128,
    ...(guarded === undefined ? {} : { guarded }),
  });
  it.each<[string, Upstream, UpstreamGuard | undefined, string]>([
    ['a Managed (unguarded) upstream: as is, even on loopback', up('127.0.0.2'), guard, 'connect'],
    ['an External literal in a refused range: never', up('127.0.0.2', true), guard, 'refused'],
    ['an External literal on the metadata address: never', up('169.254.169.254', true), guard, 'refused'],
    ['an External name of a refused range (localhost): never', up('localhost', true), guard, 'refused'],
    ['an External public literal: as is', up('198.51.100.7', true), guard, 'connect'],
    ['an External name: through the guarded lookup', up(REBOUND, true), guard, 'connect+lookup'],
    [
      'an External upstream without a guard configured: never',
      up('198.51.100.7', true),
      undefined,
      'refused',
    ],
  ])('%s', (_, upstream, g, expected) => {
    const how = upstreamConnect(upstream, g);
    const got = how.kind === 'refused' ? 'refused' : how.lookup === undefined ? 'connect' : 'connect+lookup';
    expect(got).toBe(expected);
    if (how.kind === 'refused') expect(how.message).toMatch(/^endpoint refused: /);
  });
});

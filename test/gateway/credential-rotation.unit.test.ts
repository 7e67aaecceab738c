// An upstream proxy whose credentials rotate (its Secret changed) while the gateway holds a
// lease on it: the open tunnel carries on (it authenticated once), and the next request or
// tunnel through the held lease uses the new credentials, never the ones the lease was
// granted with: the proxy's 407 to stale credentials would be reported unreachable, making
// a healthy proxy suspect for every team and moving the session off its exit.
import {
  askInside,
  basic,
  PROXY_IPS,
  startWorld,
  tunnelThrough,
  viaGateway,
  viaTunnel,
  type World,
} from './gateway-world.js';

let world: World | undefined;
afterEach(async () => {
  await world?.close();
  world = undefined;
});

describe('credentials that rotate while the gateway holds a lease on the proxy', () => {
  it.each<['tunnel' | 'http']>([['tunnel'], ['http']])(
    'the open tunnel carries on; the next %s through the held lease uses the new credentials, same exit',
    async (carrier) => {
      // geo=us: one proxy, so "the same exit" is the only right answer.
      world = await startWorld({ idleMs: 60_000 });
      const w = world;
      const username = 'session-rot1-geo-us';
      const open = await tunnelThrough(w, w.site.httpPort, undefined, username);
      expect(await askInside(open)).toBe(PROXY_IPS[0]);
      w.rotate(PROXY_IPS[0], 'rotated-secret');
      expect(await askInside(open)).toBe(PROXY_IPS[0]);
      open.destroy();
      // The lease waits idle for the session's next request (the idle timeout), on the proxy.
      while (w.gateway.openTunnels > 0) await new Promise((r) => setTimeout(r, 10));
      expect(w.gateway.leasesHeld).toBe(1);
      const next =
        carrier === 'tunnel'
          ? await viaTunnel(w.port, w.site.httpsPort, w.site.ca, basic(username))
          : await viaGateway(w.port, `http://127.0.0.1:${w.site.httpPort}/`, basic(username));
      expect([next.status, next.body.trim()]).toEqual([200, PROXY_IPS[0]]);
      // Never a 407 from the proxy, nor a report that made it suspect.
      expect(w.proxies.get(PROXY_IPS[0])!.stats.refusedAuth).toBe(0);
      expect((await w.store.totals()).suspectProxies).toBe(0);
    },
  );
});

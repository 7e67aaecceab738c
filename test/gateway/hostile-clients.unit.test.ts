// Clients that misbehave at the socket level: none may crash the gateway (one process with
// the whole operator in the all-in-one deployment) or hold a connection open unauthenticated.
import { connect, type Socket } from 'node:net';
import { basic, startWorld, viaGateway, viaTunnel, type World } from './gateway-world.js';

let world: World;
afterEach(async () => {
  await world?.close();
});

/** A raw connection to the gateway, open. */
function dial(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

describe('a refused CONNECT whose client resets the connection', () => {
  it.each<[string, string]>([
    ['a wrong token', `Proxy-Authorization: ${basic('session-a', 'WRONG-token-0123456789')}\r\n`],
    ['no credentials', ''],
    ['an invalid username', `Proxy-Authorization: ${basic('sesion-a')}\r\n`],
  ])('%s: the gateway lives on and serves the next request', async (_n, auth) => {
    world = await startWorld();
    for (const resetWhen of ['at once', 'after the answer'] as const) {
      const socket = await dial(world.port);
      socket.on('error', () => undefined);
      socket.write(`CONNECT 127.0.0.1:${world.site.httpsPort} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`);
      if (resetWhen === 'after the answer') await new Promise((r) => socket.once('data', r));
      // curl closes without reading the 407's body: an RST, not a FIN.
      socket.resetAndDestroy();
      await new Promise((r) => setTimeout(r, 50));
    }
    const next = await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''));
    expect(next.status).toBe(200);
    expect((await viaGateway(world.port, `http://127.0.0.1:${world.site.httpPort}/`, basic(''))).status).toBe(
      200,
    );
  });

  it('a CONNECT without host:port, reset: the same', async () => {
    world = await startWorld();
    const socket = await dial(world.port);
    socket.on('error', () => undefined);
    socket.write(`CONNECT nohost HTTP/1.1\r\nHost: x\r\nProxy-Authorization: ${basic('')}\r\n\r\n`);
    socket.resetAndDestroy();
    await new Promise((r) => setTimeout(r, 50));
    expect((await viaTunnel(world.port, world.site.httpsPort, world.site.ca, basic(''))).status).toBe(200);
  });
});

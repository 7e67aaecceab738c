// A CONNECT tunnel's data path on real parts (gateway-world.ts: real forward proxies, the
// memory book): bytes go both ways unchanged, whatever the pace of either side; a reader that
// stops makes the gateway stop reading (it queues no more than its high-water mark); an open
// upstream tunnel keeps none of the attempt's listeners.
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { openTunnel, TUNNEL_HIGH_WATER_MARK } from '../../gateway/upstream-tunnel.js';
import { startForwardProxy } from '../../providers/mock/forward-proxy.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { startWorld, tunnelThrough, until, type World } from './gateway-world.js';

let world: World | undefined;
let target: Server | undefined;
afterEach(async () => {
  await world?.close();
  target?.close();
  world = target = undefined;
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A TCP site: `echo` sends back what it gets; `source` sends `bytes` and closes. */
async function startTarget(kind: 'echo' | { source: Buffer }): Promise<number> {
  target = createServer((s) => {
    s.on('error', () => undefined);
    if (kind === 'echo') s.pipe(s);
    else s.end(kind.source);
  });
  await new Promise<void>((r) => target!.listen(0, '127.0.0.1', r));
  return (target.address() as AddressInfo).port;
}

/** Reads `s` until `bytes` arrived; `pauseAfter` bytes in, stops reading for `pauseMs`. */
function readAll(s: Socket, bytes: number, pause?: { after: number; ms: number }): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    let paused = false;
    s.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (pause !== undefined && !paused && got >= pause.after) {
        paused = true;
        s.pause();
        setTimeout(() => s.resume(), pause.ms);
      }
      if (got >= bytes) resolve(Buffer.concat(chunks));
    });
    s.once('error', reject);
    s.resume();
  });
}

describe('a tunnel carries bytes unchanged, both ways', () => {
  const MiB = 1024 * 1024;
  it.each<[string, { upload: number; early: number; pause?: { after: number; ms: number } }]>([
    ['8 MiB up and echoed back down', { upload: 8 * MiB, early: 0 }],
    ['bytes sent in the same write as the CONNECT, before its answer', { upload: 64 * 1024, early: 5000 }],
    [
      'a reader that stops for 300 ms after 1 MiB, then resumes',
      { upload: 8 * MiB, early: 0, pause: { after: MiB, ms: 300 } },
    ],
  ])('%s', async (_name, { upload, early, pause }) => {
    world = await startWorld({ idleMs: 60_000 });
    const port = await startTarget('echo');
    const data = randomBytes(upload);
    const s = await tunnelThrough(world, port, data.subarray(0, early));
    const reading = readAll(s, upload, pause);
    s.end(data.subarray(early));
    const back = await reading;
    expect(back.length).toBe(upload);
    expect(sha(back)).toBe(sha(data));
    s.destroy();
  });
});

describe("a reader that stops reading stops the gateway's reads", () => {
  it('queues at most its high-water mark (and one read) towards a client that reads nothing', async () => {
    world = await startWorld({ idleMs: 60_000 });
    const clientSides: Socket[] = [];
    world.gateway.server.on('connect', (_req, socket: Socket) => clientSides.push(socket));
    const source = randomBytes(32 * 1024 * 1024);
    const port = await startTarget({ source });
    const s = await tunnelThrough(world, port);
    await until(() => clientSides.length === 1 && clientSides[0].writableLength > 0);
    await new Promise((r) => setTimeout(r, 300));
    const [toClient] = clientSides;
    expect(toClient.writableHighWaterMark).toBe(TUNNEL_HIGH_WATER_MARK);
    // 32 MiB wait upstream; the gateway holds no more than the mark and one 64 KiB read.
    expect(toClient.writableLength).toBeLessThanOrEqual(TUNNEL_HIGH_WATER_MARK + 64 * 1024);
    const back = await readAll(s, source.length);
    expect(sha(back.subarray(0, source.length))).toBe(sha(source));
    s.destroy();
  });
});

describe('openTunnel', () => {
  it("hands over an open socket paused, with none of the attempt's listeners and the tunnel's mark", async () => {
    const credentials = { username: 'u', password: 'upstream-secret' };
    const fp = await startForwardProxy({ host: '127.0.0.2', port: await freePort(), credentials });
    const port = await startTarget('echo');
    try {
      const opened = await openTunnel(
        { id: 'p', host: fp.host, port: fp.port, credentials },
        `127.0.0.1:${port}`,
        1000,
      );
      if (opened.kind !== 'open') throw new Error(`not open: ${JSON.stringify(opened)}`);
      const { socket } = opened;
      expect(socket.isPaused()).toBe(true);
      expect(['data', 'error', 'close'].map((e) => socket.listenerCount(e))).toEqual([0, 0, 0]);
      expect(socket.writableHighWaterMark).toBe(TUNNEL_HIGH_WATER_MARK);
      socket.destroy();
    } finally {
      await fp.close();
    }
  });
});

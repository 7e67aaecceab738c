import { createServer, type Server, type Socket } from 'node:net';
import { freePort } from '../../framework/testing/control-plane.js';

/** A loopback TCP server that accepts connections and never answers: an unresponsive API. */
export interface BlackHole {
  port: number;
  /** Connections it accepted and that are still open (a cancelled request closes its own). */
  open(): number;
  /** Open connections on which a request arrived. */
  requested(): number;
  close(): Promise<void>;
}

export async function startBlackHole(): Promise<BlackHole> {
  const sockets = new Set<Socket>();
  const spoken = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('data', () => spoken.add(socket));
    socket.once('close', () => {
      sockets.delete(socket);
      spoken.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('black hole: no port');
  return {
    port: address.port,
    open: () => sockets.size,
    requested: () => spoken.size,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback port nothing listens on: connections are refused. */
export function closedPort(): Promise<number> {
  return freePort();
}

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LocalTarget {
  url: string;
  probeURL: string;
  /** Answers with the caller's address as plain text: spec.healthCheck.exitIPURL for local proxies. */
  exitIPURL: string;
  close(): Promise<void>;
}

/**
 * The demo's stand-in for the internet: a page to fetch through a leased proxy and a
 * generate_204 endpoint for health probes, on loopback; and /ip, an echo of the caller's
 * address (the mock's forward proxies connect out from their own loopback address, so each
 * proxy's exit IP is its own).
 */
export async function startLocalTarget(): Promise<LocalTarget> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/generate_204') {
      res.writeHead(204).end();
      return;
    }
    if (req.url === '/ip') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`${req.socket.remoteAddress ?? ''}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`hello from the local target: you asked for ${req.url}\n`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    probeURL: `http://127.0.0.1:${port}/generate_204`,
    exitIPURL: `http://127.0.0.1:${port}/ip`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

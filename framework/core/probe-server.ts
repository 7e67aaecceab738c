import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** Serves /healthz (process alive), /readyz (caches synced) and /metrics on one port. */
export class ProbeServer {
  private server?: Server;

  constructor(
    private readonly registry: Registry,
    private readonly ready: () => boolean,
  ) {}

  async listen(host: string, port: number): Promise<AddressInfo> {
    const server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/healthz') {
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      } else if (path === '/readyz') {
        const ok = this.ready();
        res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'caches not synced');
      } else if (path === '/metrics') {
        this.registry.metrics().then(
          (body) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(body),
          (err: unknown) => res.writeHead(500).end(String(err)),
        );
      } else {
        res.writeHead(404).end('not found');
      }
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

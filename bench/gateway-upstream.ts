// bench:gateway's other processes, so their CPU and heap are never the gateway's or the
// client's: `--site` serves the sites (a small HTTP page, an HTTPS page, a 100 MB body, and a
// TCP port that holds connections open for the idle tunnels); `--proxy` is one real forward
// proxy (the mock provider's, absolute-URI HTTP and CONNECT) on 127.0.0.2, the upstream both
// the straight run and the gateway go through.
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort } from '../framework/testing/control-plane.js';
import { selfSignedCert } from '../framework/testing/self-signed-cert.js';
import { startForwardProxy } from '../providers/mock/forward-proxy.js';
import { ask, forkBench, serve } from './gateway-ipc.js';

export interface SiteReady {
  httpURL: string;
  httpsURL: string;
  bulkURL: string;
  /** host:port of a TCP server that accepts and holds connections (the idle tunnels' target). */
  holdAuthority: string;
  ca: string;
  bulkBytes: number;
}

export interface ProxyReady {
  host: string;
  port: number;
  username: string;
  password: string;
}

const BULK_BYTES = 100 * 1024 * 1024;

async function site(): Promise<SiteReady> {
  const cert = selfSignedCert();
  const page = Buffer.from('ok\n');
  const chunk = Buffer.alloc(64 * 1024, 120);
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.url === '/bulk') {
      res.writeHead(200, { 'content-length': String(BULK_BYTES) });
      let sent = 0;
      const pump = () => {
        while (sent < BULK_BYTES) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      return pump();
    }
    res.writeHead(200, { 'content-length': String(page.length) }).end(page);
  };
  const plain = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const secure = https.createServer({ ...cert, keepAliveTimeout: 60_000 }, handler);
  const held = new Set<net.Socket>();
  const hold = net.createServer((s) => {
    held.add(s);
    s.on('error', () => undefined).once('close', () => held.delete(s));
  });
  for (const server of [plain, secure, hold])
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
  return {
    httpURL: `http://127.0.0.1:${port(plain)}/`,
    httpsURL: `https://127.0.0.1:${port(secure)}/`,
    bulkURL: `http://127.0.0.1:${port(plain)}/bulk`,
    holdAuthority: `127.0.0.1:${port(hold)}`,
    ca: cert.cert,
    bulkBytes: BULK_BYTES,
  };
}

async function proxy(): Promise<ProxyReady> {
  const credentials = { username: 'bench', password: 'bench-upstream-secret' };
  const started = await startForwardProxy({ host: '127.0.0.2', port: await freePort(), credentials });
  return { host: started.host, port: started.port, ...credentials };
}

const self = fileURLToPath(import.meta.url);

/** Forks one of this file's processes; `raise` lifts its descriptor limit (see forkBench). */
export async function startSite(raise = false): Promise<{ child: ChildProcess; site: SiteReady }> {
  const child = forkBench(self, ['--site'], raise);
  return { child, site: await ask<SiteReady>(child, 'start') };
}

export async function startProxy(raise = false): Promise<{ child: ChildProcess; proxy: ProxyReady }> {
  const child = forkBench(self, ['--proxy'], raise);
  return { child, proxy: await ask<ProxyReady>(child, 'start') };
}

if (process.argv[1] === self) serve({ start: () => (process.argv.includes('--site') ? site() : proxy()) });

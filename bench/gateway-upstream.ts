// bench:gateway's other process: one real forward proxy (the mock provider's, absolute-URI
// HTTP and CONNECT) on 127.0.0.2 and the sites behind it (a small HTTP page, an HTTPS page,
// a 100 MB body), so their CPU and heap are never the measured process's.
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { freePort } from '../framework/testing/control-plane.js';
import { selfSignedCert } from '../framework/testing/self-signed-cert.js';
import { startForwardProxy } from '../providers/mock/forward-proxy.js';

export interface UpstreamReady {
  proxy: { host: string; port: number; username: string; password: string };
  httpURL: string;
  httpsURL: string;
  bulkURL: string;
  ca: string;
  bulkBytes: number;
}

const BULK_BYTES = 100 * 1024 * 1024;

async function run(): Promise<UpstreamReady> {
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
  const site = http.createServer({ keepAliveTimeout: 60_000 }, handler);
  const secure = https.createServer({ ...cert, keepAliveTimeout: 60_000 }, handler);
  await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => secure.listen(0, '127.0.0.1', r));
  const credentials = { username: 'bench', password: 'bench-upstream-secret' };
  const proxy = await startForwardProxy({ host: '127.0.0.2', port: await freePort(), credentials });
  const port = (s: http.Server) => (s.address() as { port: number }).port;
  return {
    proxy: { host: proxy.host, port: proxy.port, ...credentials },
    httpURL: `http://127.0.0.1:${port(site)}/`,
    httpsURL: `https://127.0.0.1:${port(secure)}/`,
    bulkURL: `http://127.0.0.1:${port(site)}/bulk`,
    ca: cert.cert,
    bulkBytes: BULK_BYTES,
  };
}

export function startUpstream(): Promise<{ child: ChildProcess; upstream: UpstreamReady }> {
  const child = fork(fileURLToPath(import.meta.url), ['--upstream'], { execArgv: process.execArgv });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('message', (upstream) => resolve({ child, upstream: upstream as UpstreamReady }));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv.includes('--upstream')) {
  void run().then((ready) => process.send?.(ready));
  process.on('disconnect', () => process.exit(0));
}

// A site for the gateway's tests: HTTP and HTTPS (a throw-away certificate for 127.0.0.1),
// answering with the caller's address (each forward proxy connects out from its own loopback
// address, so the answer names the exit IP) and 403 to the addresses the test bans.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { selfSignedCert } from '../../framework/testing/self-signed-cert.js';

export interface EchoSite {
  httpURL: string;
  httpsURL: string;
  ca: string;
  banned: Set<string>;
  /** The caller address of every request, in order. */
  seen: string[];
  close(): Promise<void>;
}

export async function startEchoSite(): Promise<EchoSite> {
  const cert = selfSignedCert();
  const banned = new Set<string>();
  const seen: string[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const ip = req.socket.remoteAddress ?? '';
    seen.push(ip);
    const body = banned.has(ip) ? `banned ${ip}\n` : `${ip}\n`;
    res.writeHead(banned.has(ip) ? 403 : 200, {
      'content-type': 'text/plain',
      'content-length': String(body.length),
    });
    res.end(body);
  };
  const http = createHttpServer(handler);
  const https = createHttpsServer(cert, handler);
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  await new Promise<void>((r) => https.listen(0, '127.0.0.1', r));
  return {
    httpURL: `http://127.0.0.1:${(http.address() as AddressInfo).port}/`,
    httpsURL: `https://127.0.0.1:${(https.address() as AddressInfo).port}/`,
    ca: cert.cert,
    banned,
    seen,
    async close() {
      for (const s of [http, https]) {
        s.closeAllConnections();
        await new Promise((r) => s.close(r));
      }
    },
  };
}

// Loopback targets and proxy clients for the forward-proxy tests.
import { createServer as createHttpServer, request as httpRequest, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as tlsConnect } from 'node:tls';
import { ProxyAgent, request } from 'undici';

export interface Target {
  port: number;
  close(): Promise<void>;
}

async function listen(server: Server): Promise<Target> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('no address');
  return {
    port: address.port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An HTTP server answering "<scheme> <method> <path>" with status 200. */
export function startTarget(scheme: 'http' | 'https', tls?: { key: string; cert: string }): Promise<Target> {
  const handler = (
    req: { method?: string; url?: string },
    res: { writeHead(s: number): { end(b: string): void } },
  ) => res.writeHead(200).end(`${scheme} ${req.method} ${req.url}`);
  return listen(scheme === 'https' ? createHttpsServer(tls!, handler) : createHttpServer(handler));
}

export { selfSignedCert } from '../../../framework/testing/self-signed-cert.js';

export interface ProxyAddress {
  host: string;
  port: number;
}

/** GET an http:// URL the way a crawler does through a proxy: absolute URI to the proxy. */
export function getViaProxy(
  proxy: ProxyAddress,
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: proxy.host, port: proxy.port, method: 'GET', path: url, agent: false, headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** GET https://127.0.0.1:<port><path> through a CONNECT tunnel, verifying the target's certificate. */
export function getViaTunnel(
  proxy: ProxyAddress,
  port: number,
  path: string,
  ca: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const connectReq = httpRequest({
      host: proxy.host,
      port: proxy.port,
      method: 'CONNECT',
      path: `127.0.0.1:${port}`,
      agent: false,
      headers,
    });
    connectReq.on('error', reject);
    connectReq.on('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        reject(new Error(`CONNECT answered ${res.statusCode}`));
        return;
      }
      const tlsSocket = tlsConnect({ socket, ca, host: '127.0.0.1' });
      // Plain http.request over the TLS socket: https.request would open its own connection.
      const req = httpRequest(
        { host: '127.0.0.1', port, path, method: 'GET', createConnection: () => tlsSocket },
        (r) => {
          let body = '';
          r.setEncoding('utf8');
          r.on('data', (c: string) => (body += c));
          r.on('end', () => {
            tlsSocket.destroy();
            resolve({ status: r.statusCode ?? 0, body });
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
    connectReq.end();
  });
}

/**
 * One GET through a proxy URL (credentials as its userinfo), as a crawler makes it with undici:
 * the status, or the error's message, since a refused CONNECT is an error, not a status
 * (undici: "Proxy response (407) !== 200").
 */
export async function statusThrough(
  proxyURL: string,
  url: string,
  timeoutMs?: number,
): Promise<number | string> {
  const dispatcher = new ProxyAgent(proxyURL);
  try {
    const timeouts = timeoutMs === undefined ? {} : { headersTimeout: timeoutMs, bodyTimeout: timeoutMs };
    const res = await request(url, { dispatcher, ...timeouts });
    await res.body.dump();
    return res.statusCode;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await dispatcher.close();
  }
}

// Probe targets for tests: a local HTTP server with a switchable status, and an HTTPS one
// with a throw-away self-signed certificate.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { SelfSignedCert } from '../../framework/testing/self-signed-cert.js';

export interface TestTarget {
  url: string;
  /** Status the target answers with (default 204). */
  status: number;
  hits: number;
  close(): Promise<void>;
}

function serve(server: http.Server | https.Server, scheme: 'http' | 'https'): Promise<TestTarget> {
  const target: TestTarget = {
    url: '',
    status: 204,
    hits: 0,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    target.hits++;
    res.writeHead(target.status).end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      target.url = `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/generate_204`;
      resolve(target);
    }),
  );
}

export function startHttpTarget(): Promise<TestTarget> {
  return serve(http.createServer(), 'http');
}

export {
  selfSignedCert as makeSelfSignedCert,
  type SelfSignedCert,
} from '../../framework/testing/self-signed-cert.js';

export function startHttpsTarget(cert: SelfSignedCert): Promise<TestTarget> {
  return serve(https.createServer({ key: cert.key, cert: cert.cert }), 'https');
}

// Probe targets for tests: a local HTTP server with a switchable status, and an HTTPS one
// with a throw-away self-signed certificate.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

export interface SelfSignedCert {
  key: string;
  cert: string;
}

export function makeSelfSignedCert(): SelfSignedCert {
  const dir = mkdtempSync(join(tmpdir(), 'health-cert-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-subj',
        '/CN=localhost',
        '-days',
        '1',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return {
      key: readFileSync(join(dir, 'key.pem'), 'utf8'),
      cert: readFileSync(join(dir, 'cert.pem'), 'utf8'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function startHttpsTarget(cert: SelfSignedCert): Promise<TestTarget> {
  return serve(https.createServer({ key: cert.key, cert: cert.cert }), 'https');
}

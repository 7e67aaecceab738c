// Issue 47 item 5: a managed Redis (Memorystore, ElastiCache) serves TLS under its own server
// CA; --redis-ca-file gives that CA, and without it the server is not trusted.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectRedis, whenReady } from '../../book/redis-connection.js';
import { startRedisServer, type RedisServer } from '../harness/redis-server.js';
import { silentLogger } from './fixtures.js';

let dir: string;
let server: RedisServer;
let tlsPort: number;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'redis-tls-'));
  // A private CA and a server certificate it signed, for 127.0.0.1.
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '1',
    '-subj',
    '/CN=test-ca',
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
    '-subj',
    '/CN=127.0.0.1',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '1',
    '-extfile',
    'san.ext',
  );
  tlsPort = await freePort();
  server = await startRedisServer([
    '--port',
    '0',
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    join(dir, 'server.pem'),
    '--tls-key-file',
    join(dir, 'server.key'),
    '--tls-ca-cert-file',
    join(dir, 'ca.pem'),
    '--tls-auth-clients',
    'no',
  ]);
});

afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('rediss:// with a private server CA', () => {
  it('connects when given the CA', async () => {
    const redis = connectRedis({
      url: `rediss://127.0.0.1:${tlsPort}`,
      ca: readFileSync(join(dir, 'ca.pem'), 'utf8'),
      logger: silentLogger,
    });
    try {
      await whenReady(redis);
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  });

  it('does not trust the server without it', async () => {
    const redis = connectRedis({ url: `rediss://127.0.0.1:${tlsPort}`, logger: silentLogger });
    const error = new Promise<Error>((resolve) => redis.once('error', resolve));
    try {
      await expect(whenReady(redis, 3000)).rejects.toThrow(/not ready/);
      expect((await error).message).toMatch(/self[- ]signed|unable to verify|certificate/i);
    } finally {
      redis.disconnect();
    }
  });
});

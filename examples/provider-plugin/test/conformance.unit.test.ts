import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describeProviderConformance } from 'proxy-operator/conformance';
import { classifyFsError } from '../src/error-mapping.js';
import { DirectoryProvider } from '../src/index.js';

// What a plugin author runs: the operator's conformance kit against their provider, and their
// error mapping's table.
const logger = pino({ level: 'silent' });
let dir: string;
const settings = (path: string, latencyMillis = 0) => ({
  path,
  provisioningSeconds: 60,
  address: '127.0.0.1',
  latencyMillis,
});

describeProviderConformance({
  name: 'directory (example plugin)',
  provider: async () => {
    dir = await mkdtemp(join(tmpdir(), 'directory-provider-'));
    return new DirectoryProvider('directory', settings(dir), logger, new Registry());
  },
  unknownID: 'proxy-000000000000',
  // A call that takes an hour: only its AbortSignal ends it.
  unresponsive: () => new DirectoryProvider('directory', settings(dir, 3_600_000), logger, new Registry()),
  // A "folder" inside a file: every call fails (ENOTDIR).
  failing: () => new DirectoryProvider('directory', settings('/dev/null/instances'), logger, new Registry()),
  seedForeign: async (owner) => {
    const created = new Date().toISOString();
    await writeFile(
      join(dir, `foreign-${owner}.json`),
      JSON.stringify({ id: 'x', labels: {}, createdAt: created }),
    );
    await writeFile(
      join(dir, `unowned-${owner}.json`),
      JSON.stringify({ id: 'y', labels: { 'proxy-operator-managed': 'true' }, createdAt: created }),
    );
  },
  provisionsVisibly: true,
  teardown: () => rm(dir, { recursive: true, force: true }),
});

describe('the error mapping', () => {
  it.each([
    ['ENOENT', 'NotFound'],
    ['ENOSPC', 'QuotaExceeded'],
    ['EDQUOT', 'QuotaExceeded'],
    ['EACCES', 'Permanent'],
    ['EPERM', 'Permanent'],
    ['EROFS', 'Permanent'],
    ['ENOTDIR', 'Permanent'],
    ['EISDIR', 'Permanent'],
    ['EMFILE', 'Transient'],
    ['EIO', 'Transient'],
  ])('%s is %s', (code, kind) => {
    expect(classifyFsError(Object.assign(new Error(code), { code }))).toBe(kind);
  });
});

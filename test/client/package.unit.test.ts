// The client as its users get it: the workspace package builds with its own tsconfig, a
// separate Node process imports it by name through its exports map, and it depends on
// nothing beyond undici (Crawlee's @crawlee/core only as an optional peer, only from the crawlee
// entry).
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const clientDir = join(root, 'client');
const pkg = JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8')) as {
  name: string;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
  exports: Record<string, { types: string; default: string }>;
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

function importedPackages(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'"]*from\s+'([^']+)'/gm)]
    .map((m) => m[1])
    .filter((spec) => !spec.startsWith('.'));
}

describe('the @proxy-operator/client package', () => {
  it("depends on undici only, with Crawlee's @crawlee/core an optional peer", () => {
    expect(pkg.name).toBe('@proxy-operator/client');
    expect(Object.keys(pkg.dependencies)).toEqual(['undici']);
    expect(pkg.peerDependencies).toEqual({ '@crawlee/core': expect.stringMatching(/^\^3\./) });
    expect(pkg.peerDependenciesMeta['@crawlee/core'].optional).toBe(true);
  });

  it.each(sourceFiles(join(clientDir, 'src')).map((f) => [f.slice(clientDir.length + 1), f]))(
    '%s imports only node:, undici and (in crawlee/) @crawlee/core',
    (name, file) => {
      const allowed = (spec: string) =>
        spec.startsWith('node:') ||
        spec === 'undici' ||
        (name.startsWith('src/crawlee/') && spec === '@crawlee/core');
      expect(importedPackages(file).filter((spec) => !allowed(spec))).toEqual([]);
    },
  );

  it('builds, and a consumer imports both entry points by package name', async () => {
    await run(
      process.execPath,
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(clientDir, 'tsconfig.json')],
      {
        cwd: root,
      },
    );
    for (const entry of Object.values(pkg.exports)) {
      expect(existsSync(join(clientDir, entry.types))).toBe(true);
      expect(existsSync(join(clientDir, entry.default))).toBe(true);
    }
    const consumer = `
      import { DiscoveryClient, DiscoveryApiError, isNoLease } from '@proxy-operator/client';
      import { ProxyOperatorConfiguration } from '@proxy-operator/client/crawlee';
      import { ProxyConfiguration } from 'crawlee';
      const client = new DiscoveryClient({ baseUrl: 'http://127.0.0.1:9' });
      const config = new ProxyOperatorConfiguration({ client });
      console.log(JSON.stringify({
        client: typeof client.lease,
        error: isNoLease(new DiscoveryApiError(409, 'all_busy', 'busy', 'POST /v1/leases')),
        crawlee: config instanceof ProxyConfiguration,
        hook: typeof config.postNavigationHook,
      }));
      await config.close();
    `;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', consumer], { cwd: root });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({
      client: 'function',
      error: true,
      crawlee: true,
      hook: 'function',
    });
  });

  // The `crawlee` meta-package loads @crawlee/browser-pool, whose module body starts an open
  // proxy-chain server on every interface (`[::]`, port 0, unref'd so nothing notices): one per
  // import, i.e. one per jest test file that imported it. The integration imports @crawlee/core.
  it('the crawlee entry opens no listening socket on import (the crawlee meta-package does)', async () => {
    await run(
      process.execPath,
      [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(clientDir, 'tsconfig.json')],
      {
        cwd: root,
      },
    );
    const listeningAfter = async (specifier: string): Promise<string[]> => {
      const script = `
        import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
        await import(${JSON.stringify(specifier)});
        await new Promise((resolve) => setTimeout(resolve, 300));
        const mine = new Set(readdirSync('/proc/self/fd').map((fd) => {
          try { return /^socket:\\[(\\d+)\\]$/.exec(readlinkSync('/proc/self/fd/' + fd))?.[1]; } catch { return undefined; }
        }));
        const rows = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) => readFileSync(f, 'utf8').split('\\n').slice(1));
        const listening = rows.map((r) => r.trim().split(/\\s+/)).filter((c) => c[3] === '0A' && mine.has(c[9]));
        console.log(JSON.stringify(listening.map((c) => c[1])));
      `;
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: root });
      return JSON.parse(stdout.trim().split('\n').pop()!) as string[];
    };
    expect(await listeningAfter('@proxy-operator/client/crawlee')).toEqual([]);
    // The check sees such a server: the meta-package's import leaves one behind.
    expect(await listeningAfter('crawlee')).toHaveLength(1);
  });

  it('installs from the tarball `npm run client:pack` writes, built, into a project outside the repository', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'client-consumer-'));
    try {
      await run('npm', ['pack', '--workspace', 'client', '--pack-destination', outside], { cwd: root });
      const tarball = readdirSync(outside).find((f) => f.endsWith('.tgz'));
      expect(tarball).toBe(
        `proxy-operator-client-${JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8')).version}.tgz`,
      );
      await writeFile(
        join(outside, 'package.json'),
        JSON.stringify({ name: 'consumer', type: 'module', private: true }),
      );
      await run('npm', ['install', '--no-audit', '--no-fund', join(outside, tarball!)], { cwd: outside });
      const consumer = `
        import { DiscoveryClient } from '@proxy-operator/client';
        console.log(typeof new DiscoveryClient({ baseUrl: 'http://127.0.0.1:9' }).lease);
      `;
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', consumer], {
        cwd: outside,
      });
      expect(stdout.trim()).toBe('function');
      expect(existsSync(join(outside, 'node_modules/@proxy-operator/client/build/crawlee/index.js'))).toBe(
        true,
      );
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  }, 120_000);
});

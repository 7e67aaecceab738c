import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// A plugin author's first hour, offline: plugin-template/ (and examples/provider-plugin/, which
// has its shape) copied out of the tree, the operator's plugin API installed from `npm pack` of
// this repository, every other package linked from this checkout's node_modules, and only the
// ones npm would install (what the plugin and the packed operator declare, and what those depend
// on). Then each must type-check, its test (the conformance kit) pass and exit by itself, and
// its build run in the real operator.
const root = fileURLToPath(new URL('../..', import.meta.url));
const shared = join(root, 'node_modules');
const nodeBin = dirname(process.execPath);

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}
const manifest = (dir: string) => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/** The packages npm would put at the top of node_modules: the roots and everything they need, hoisted. */
function closure(roots: string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...roots];
  while (queue.length > 0) {
    const name = queue.pop()!;
    if (seen.has(name) || !existsSync(join(shared, name, 'package.json'))) continue; // nested or absent
    seen.add(name);
    const m = manifest(join(shared, name));
    queue.push(...Object.keys({ ...m.dependencies, ...m.optionalDependencies, ...m.peerDependencies }));
  }
  return seen;
}

function run(cwd: string, args: string[]): { code: number | null; output: string } {
  const r = spawnSync(process.execPath, args, {
    cwd,
    encoding: 'utf8',
    timeout: 180_000,
    env: { PATH: `${nodeBin}:${process.env.PATH}`, HOME: process.env.HOME, CI: 'true' },
  });
  return { code: r.status, output: `${r.stdout}\n${r.stderr}` };
}

/** What a copyable plugin is, and what its test run must say. */
interface Copyable {
  folder: string;
  type: string;
  /** try-plugin's --settings (`{work}` is the test's temp folder). */
  settings: string;
  /** The conformance cases its test skips, by the kit's SKIPPED reason. */
  skipped: string[];
}

const COPYABLE: Copyable[] = [
  {
    folder: 'plugin-template',
    type: 'memory',
    settings: '{"provisioningSeconds":0,"address":"127.0.0.9"}',
    skipped: [
      'SKIPPED: the subject gives no failing() backend',
      'SKIPPED: the subject gives no unresponsive() backend',
    ],
  },
  {
    folder: 'examples/provider-plugin',
    type: 'directory',
    settings: '{"path":"{work}/instances","provisioningSeconds":0}',
    skipped: [],
  },
];

let work: string;
let tarball: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'plugin-template-'));
  // npm pack runs prepack (the plugin kit's build) and writes the tarball an author installs.
  tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', work], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${nodeBin}:${process.env.PATH}` },
  })
    .trim()
    .split('\n')
    .at(-1)!;
  // try-plugin runs the operator's build.
  const build = run(root, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json']);
  expect([build.code, build.output.trim()]).toEqual([0, '']);
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.each(COPYABLE)('$folder, out of the tree', ({ folder, type, settings, skipped }) => {
  let plugin: string;

  beforeAll(() => {
    plugin = join(work, folder.replace('/', '-'));
    cpSync(join(root, folder), plugin, { recursive: true });
    const modules = join(plugin, 'node_modules');
    const operator = join(modules, 'proxy-operator');
    mkdirSync(operator, { recursive: true });
    execFileSync('tar', ['xzf', join(work, tarball), '--strip-components=1', '-C', operator]);
    const own = manifest(plugin);
    const wanted = closure([
      ...Object.keys({ ...own.dependencies, ...own.devDependencies }).filter((n) => n !== 'proxy-operator'),
      ...Object.keys(manifest(operator).dependencies ?? {}),
    ]);
    for (const name of wanted) {
      mkdirSync(dirname(join(modules, name)), { recursive: true });
      symlinkSync(join(shared, name), join(modules, name), 'dir');
    }
  }, 300_000);

  it('installs the plugin API and the kit from the packed operator, and nothing else of it', () => {
    const operator = join(plugin, 'node_modules', 'proxy-operator');
    expect(existsSync(join(operator, 'build/plugin-kit/providers/plugin.d.ts'))).toBe(true);
    expect(existsSync(join(operator, 'build/plugin-kit/providers/conformance/index.js'))).toBe(true);
    expect(readdirSync(operator).sort()).toEqual(['README.md', 'build', 'package.json']); // npm always packs the README
  });

  it('type-checks with only the dependencies it declares (ProviderOperation, ProviderErrorKind exported)', () => {
    const { code, output } = run(plugin, [
      'node_modules/typescript/bin/tsc',
      '-p',
      'tsconfig.json',
      '--noEmit',
    ]);
    expect([code, output.trim()]).toEqual([0, '']);
  }, 180_000);

  it('builds the module the operator loads', () => {
    const { code, output } = run(plugin, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json']);
    expect([code, output.trim()]).toEqual([0, '']);
    expect(existsSync(join(plugin, 'build/index.js'))).toBe(true);
  }, 180_000);

  it('runs the conformance kit cleanly: passes, says which cases it skipped, no warnings, jest exits', () => {
    const script = manifest(plugin) as Manifest & { scripts: Record<string, string> };
    const args = script.scripts.test.split(' ').slice(1); // node <flags> node_modules/jest/bin/jest.js
    const { code, output } = run(plugin, [...args, '--verbose']);
    const tally = skipped.length > 0 ? `${skipped.length} skipped, \\d+ passed` : '\\d+ passed';
    expect([code, output]).toEqual([0, expect.stringMatching(new RegExp(`Tests:\\s+${tally}`))]);
    for (const reason of skipped) expect(output).toContain(reason);
    expect(output).not.toMatch(/TS151002|did not exit|open handle|warning/i);
  }, 180_000);

  it("the built plugin runs in the real operator against the demo's control plane (npm run try-plugin)", () => {
    const tried = run(root, [
      'build/cmd/try-plugin.js',
      plugin,
      `--type=${type}`,
      `--settings=${settings.replace('{work}', work)}`,
      '--no-wait',
      '--seconds=60',
    ]);
    expect([tried.code, tried.output]).toEqual([0, expect.stringContaining('the provider answered')]);
    expect(tried.output).toMatch(/providerID=proxy-[0-9a-f]{12}/);
  }, 300_000);
});

// The Python package installs as python/README.md says: each line of its install block (marked
// `<!-- checked: install -->`), with /path/to/proxy-operator replaced by this checkout, run by
// bash in a fresh venv (its pip first on PATH), offline (the dependencies and the build backend
// come from .ci/python-wheels, which .ci/run fills): from the folder, from its git URL with
// #subdirectory=python (this repository's committed HEAD), and from the wheel
// `npm run python:wheel` builds. Each venv then imports the client and the add-on, and carries
// py.typed.
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cleanEnv, ROOT, runToEnd } from './python-env.js';

const WHEELS = join(ROOT, '.ci/python-wheels');
const SYSTEM_PYTHON = process.env.PYTHON3 ?? 'python3';
const CHECKOUT = ROOT.replace(/\/$/, '');

/** The README's install commands, one per line, comments dropped. */
function installLines(): string[] {
  const readme = readFileSync(join(ROOT, 'python/README.md'), 'utf8');
  const block = /<!-- checked: install\b[^>]*-->\n```sh\n([\s\S]*?)\n```/.exec(readme);
  if (!block) throw new Error('python/README.md has no block marked <!-- checked: install -->');
  return block[1]
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

const offline = (venv: string) =>
  cleanEnv({
    PIP_NO_INDEX: '1',
    PIP_FIND_LINKS: WHEELS,
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    PYTHONWARNINGS: '',
    // The venv's pip and python first; npm with the node that runs this test.
    PATH: `${join(venv, 'bin')}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    VIRTUAL_ENV: venv,
  });

let dir: string;

beforeAll(async () => {
  if (!existsSync(WHEELS)) {
    throw new Error(`${WHEELS} is missing: run .ci/run (it keeps httpx and setuptools wheels there)`);
  }
  dir = await mkdtemp(join(tmpdir(), 'py-install-'));
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const IMPORTS = [
  'import importlib.resources, proxy_operator',
  'from proxy_operator import AsyncDiscoveryClient, DiscoveryClient, target_of',
  'from importlib.metadata import version',
  "assert importlib.resources.files('proxy_operator').joinpath('py.typed').is_file()",
  "print(version('proxy-operator-client'), target_of('https://Shop.Example:443/x'))",
].join('\n');

it('the README names the three ways: a folder, a git URL with #subdirectory=python, a wheel', () => {
  const lines = installLines();
  expect(lines).toHaveLength(3);
  expect(lines[0]).toMatch(/^pip install \/path\/to\/proxy-operator\/python$/);
  expect(lines[1]).toMatch(/^pip install "git\+file:\/\/\/path\/to\/proxy-operator#subdirectory=python"$/);
  expect(lines[2]).toMatch(/npm run python:wheel && pip install python\/dist\/\S+\.whl$/);
  expect(readFileSync(join(ROOT, 'python/README.md'), 'utf8')).not.toMatch(/YOUR-GIT-HOST/);
});

it.each(installLines().map((line, i) => ({ i, line })))(
  'README install line $i into a fresh venv: $line',
  async ({ i, line }) => {
    const venv = join(dir, `venv-${i}`);
    await runToEnd(SYSTEM_PYTHON, ['-m', 'venv', venv], offline(venv));
    const command = line
      .replaceAll('/path/to/proxy-operator', CHECKOUT)
      .replace(/\bpip install\b/g, 'pip install --quiet');
    await runToEnd('bash', ['-euo', 'pipefail', '-c', command], offline(venv), dir);
    const { stdout } = await runToEnd(join(venv, 'bin/python'), ['-c', IMPORTS], offline(venv), dir);
    expect(stdout.trim()).toBe('0.1.0 shop.example');
  },
  240_000,
);

// The Python package installs as python/README.md says, each way into a fresh venv, offline
// (the dependencies and the build backend come from .ci/python-wheels, which .ci/run fills):
// from a path, from the wheel `npm run python:wheel` builds, and from a git URL with
// #subdirectory=python (a git+file:// URL of this repository's committed HEAD). Each venv then
// imports the client and the add-on, and its wheel carries py.typed.
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanEnv, ROOT, runToEnd } from './python-env.js';

const WHEELS = join(ROOT, '.ci/python-wheels');
const SYSTEM_PYTHON = process.env.PYTHON3 ?? 'python3';
const offline = () =>
  cleanEnv({
    PIP_NO_INDEX: '1',
    PIP_FIND_LINKS: WHEELS,
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
    PYTHONWARNINGS: '',
  });

let dir: string;
let wheel: string;

beforeAll(async () => {
  if (!existsSync(WHEELS)) {
    throw new Error(`${WHEELS} is missing: run .ci/run (it keeps httpx and setuptools wheels there)`);
  }
  dir = await mkdtemp(join(tmpdir(), 'py-install-'));
  const { stdout } = await runToEnd('bash', ['python/build-wheel.sh'], offline());
  wheel = stdout.trim().split('\n').pop()!;
}, 180_000);

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

it.each([
  { how: 'a path', spec: () => join(ROOT, 'python') },
  { how: 'the wheel', spec: () => wheel },
  {
    how: 'a git URL with #subdirectory=python',
    spec: () => `git+file://${ROOT.replace(/\/$/, '')}#subdirectory=python`,
  },
])(
  'pip install from $how into a fresh venv',
  async ({ how, spec }) => {
    const venv = join(dir, how.replace(/\W+/g, '-'));
    await runToEnd(SYSTEM_PYTHON, ['-m', 'venv', venv], offline());
    await runToEnd(join(venv, 'bin/pip'), ['install', '--quiet', spec()], offline());
    const { stdout } = await runToEnd(join(venv, 'bin/python'), ['-c', IMPORTS], offline());
    expect(stdout.trim()).toBe('0.1.0 shop.example');
  },
  180_000,
);

import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkNodeVersion, REQUIRED_NODE_MAJOR } from '../../cmd/node-version.js';

// Issue 26 item 9: on Node 20 the demo died with "does not provide an export named
// 'registerHooks'" after an install that succeeded. Every entry point checks first.
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('checkNodeVersion', () => {
  it.each([
    ['24.0.0', true],
    ['24.22.3', true],
    ['v24.1.0', true],
    ['25.0.0', true],
    ['23.11.1', false],
    ['22.12.0', false],
    ['20.20.2', false],
    ['18.0.0', false],
    ['', false],
    ['not-a-version', false],
  ])('%s: %s', (version, ok) => {
    const problem = checkNodeVersion(version, 'demo');
    if (ok) expect(problem).toBeUndefined();
    else {
      expect(problem).toContain(
        `demo: Node.js ${REQUIRED_NODE_MAJOR} or newer is needed; this is Node.js ${version} `,
      );
      expect(problem).toContain(`nvm install ${REQUIRED_NODE_MAJOR}`);
    }
  });
});

describe('every entry point on an older Node', () => {
  // A preload makes this Node report 20.19.0: what the entry point reads, before anything
  // else of the product is loaded (the real thing fails while linking, which a preload
  // cannot fake, so this checks the check runs first and exits).
  const fakeOld = `data:text/javascript,Object.defineProperty(process.versions,'node',{value:'20.19.0'})`;
  it.each([
    ['cmd/operator.ts', 'proxy-operator'],
    ['cmd/demo.ts', 'demo'],
    ['cmd/control-plane-setup.ts', 'control-plane:setup'],
  ])('%s exits 1 saying which Node it needs', (entry, program) => {
    const run = spawnSync(
      process.execPath,
      [
        '--no-warnings',
        '--import',
        fakeOld,
        '--import',
        join(root, 'test/harness/ts-hooks.ts'),
        join(root, entry),
        '--help',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      `${program}: Node.js ${REQUIRED_NODE_MAJOR} or newer is needed; this is Node.js 20.19.0`,
    );
  });

  it('and on this Node the same entry point runs (its --help)', () => {
    const run = spawnSync(
      process.execPath,
      [
        '--no-warnings',
        '--import',
        join(root, 'test/harness/ts-hooks.ts'),
        join(root, 'cmd/demo.ts'),
        '--help',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^Usage: npm run demo/);
  });
});

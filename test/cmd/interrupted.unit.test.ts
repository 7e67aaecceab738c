// The demo and try-plugin keep their world up until Ctrl-C or SIGTERM (cmd/interrupted.ts):
// a real child process, told by a real signal.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCRIPT = `
  const { interrupted } = await import(${JSON.stringify(join(root, 'cmd/interrupted.ts'))});
  // The demo's world (its control plane, servers) keeps the loop alive; here a timer does.
  const world = setInterval(() => undefined, 1000);
  const done = interrupted();
  process.stdout.write('waiting\\n');
  await done;
  clearInterval(world);
  process.stdout.write('interrupted\\n');
`;

describe('interrupted', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'resolves on %s, and the process ends by itself',
    async (signal) => {
      const child = spawn(
        process.execPath,
        [
          '--no-warnings',
          '--import',
          join(root, 'test/harness/ts-hooks.ts'),
          '--input-type=module',
          '-e',
          SCRIPT,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (out === 'waiting\n') child.kill(signal);
      });
      child.stderr.on('data', (b: Buffer) => (out += b.toString()));
      const [code, killedBy] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
        child.once('exit', (c, s) => resolve([c, s])),
      );
      expect({ out, code, killedBy }).toEqual({ out: 'waiting\ninterrupted\n', code: 0, killedBy: null });
    },
    30_000,
  );
});

// `npm run demo -- <flags>` as the README shows it, started as a child process (its own
// process group, so the stop reaches npm's children too) and read from its output: the
// discovery API's and the metrics' URLs come from the "Your turn" lines it prints once
// everything is Ready. Everything it starts listens on loopback.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface DemoProcess {
  discoveryURL: string;
  metricsURL: string;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Ctrl-C, as a user stops it; waits for its clean-up (SIGKILL to the group after 60 s). */
  stop(): Promise<void>;
}

export async function startDemoProcess(flags: string[], timeoutMs = 600_000): Promise<DemoProcess> {
  // Node 24 first on PATH: npm runs the demo with the node beside it.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  env.PATH = `${dirname(process.execPath)}:${env.PATH ?? ''}`;
  const child = spawn('npm', ['run', 'demo', '--', ...flags], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = () => stopGroup(child, exited);
  try {
    const urls = await new Promise<{ discoveryURL: string; metricsURL: string }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`npm run demo printed no "Your turn" within ${timeoutMs / 1000} s:\n${out}`)),
        timeoutMs,
      );
      const look = () => {
        const found =
          /'(http:\/\/127\.0\.0\.1:\d+)\/v1\/proxies\?healthy=true' ; curl -s (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(
            out,
          );
        if (found && out.includes('Press Ctrl-C')) {
          clearTimeout(timer);
          resolve({ discoveryURL: found[1], metricsURL: found[2] });
        }
      };
      child.stdout.on('data', look);
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`npm run demo exited ${code} before it was ready:\n${out}`));
      });
    });
    return { ...urls, output: () => out, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** SIGINT to the whole group (npm, the demo, its etcd and kube-apiserver), then waits until
 * every process of it has gone (the demo cleans up first); SIGKILL after 60 s. */
async function stopGroup(child: ChildProcess, exited: Promise<number | null>): Promise<void> {
  const pid = child.pid;
  if (pid === undefined) return;
  const signal = (s: NodeJS.Signals | 0): boolean => {
    try {
      process.kill(-pid, s);
      return true;
    } catch {
      return false; // the group is gone
    }
  };
  signal('SIGINT');
  await exited;
  const deadline = Date.now() + 60_000;
  while (signal(0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  signal('SIGKILL');
}

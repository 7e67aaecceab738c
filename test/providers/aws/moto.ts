import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../framework/testing/control-plane.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** Where `.ci/run` installs moto's server (a venv with PyPI `moto[server]`). */
export const MOTO_VENV = join(root, '.ci/moto');
const INSTALL_HINT =
  `install it with: python3 -m venv ${MOTO_VENV} && ${MOTO_VENV}/bin/pip install "moto[server]==5.2.5" ` +
  '(.ci/run does this), or set MOTO_SERVER to a moto_server binary';

/** The moto_server binary: $MOTO_SERVER, the .ci venv, or one on PATH; a clear error otherwise. */
export function motoServerBinary(env: NodeJS.ProcessEnv = process.env, venv = MOTO_VENV): string {
  const candidates = [env.MOTO_SERVER, join(venv, 'bin/moto_server')].filter((c): c is string => !!c);
  for (const c of candidates) if (existsSync(c)) return c;
  const which = spawnSync('/bin/sh', ['-c', 'command -v moto_server'], { encoding: 'utf8', env });
  const onPath = (which.stdout ?? '').trim();
  if (which.status === 0 && onPath) return onPath;
  throw new Error(
    `moto_server (the EC2 emulator the aws tests run against) is not installed: ${INSTALL_HINT}`,
  );
}

export interface Moto {
  /** http://127.0.0.1:PORT */
  endpoint: string;
  stop(): Promise<void>;
}

/**
 * Starts moto's server on a free loopback port and waits until it answers. One per test file;
 * its state is in memory, so each file starts from an empty account.
 */
export async function startMoto(timeoutMs = 60_000): Promise<Moto> {
  const binary = motoServerBinary();
  const port = await freePort();
  const child: ChildProcess = spawn(binary, ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const up = await fetch(`${endpoint}/moto-api/`).then(
      (r) => r.status < 500,
      () => false,
    );
    if (up) break;
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('running'), 100))]);
    if (code !== 'running')
      throw new Error(`moto_server (${binary}) exited with ${String(code)}: ${stderr.trim()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto_server did not answer on ${endpoint} within ${timeoutMs} ms: ${stderr.trim()}`);
    }
  }
  return {
    endpoint,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

/**
 * Credentials for the standard AWS chain (moto accepts any), and no instance-metadata lookups:
 * the tests never leave loopback. Returns the restore function.
 */
export function useTestCredentials(): () => void {
  const keys = [
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN',
    'AWS_EC2_METADATA_DISABLED',
    'AWS_PROFILE',
  ];
  const saved = Object.fromEntries(keys.map((k) => [k, process.env[k]]));
  process.env.AWS_ACCESS_KEY_ID = 'moto-test';
  process.env.AWS_SECRET_ACCESS_KEY = 'moto-test';
  process.env.AWS_EC2_METADATA_DISABLED = 'true';
  delete process.env.AWS_SESSION_TOKEN;
  delete process.env.AWS_PROFILE;
  return () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
}

// The Python side of the tests: the venv .ci/run creates (.ci/python, with Scrapy, pytest and
// the package installed from python/; TEST_PYTHON_VENV names another, e.g. a git worktree's own
// venv with the worktree's python/ installed), and a way to run its programs with
// loopback-only, proxy-free environments.
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const VENV = process.env.TEST_PYTHON_VENV
  ? process.env.TEST_PYTHON_VENV.replace(/\/$/, '')
  : `${ROOT}.ci/python`;
export const PYTHON = `${VENV}/bin/python`;

/** The venv's python, or an error saying how to make it. */
export function venvPython(): string {
  if (!existsSync(PYTHON)) {
    throw new Error(
      `${PYTHON} is missing: run .ci/run, or: python3 -m venv .ci/python && .ci/python/bin/pip install -e "python[test]" mypy`,
    );
  }
  return PYTHON;
}

/** This process's environment without proxy variables (everything here talks to loopback directly). */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return { ...env, PYTHONWARNINGS: 'error', ...extra };
}

export const run = promisify(execFile);

/** Runs a program to its end, its output collected; rejects with both when it fails. */
export function runToEnd(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd = ROOT,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve({ stdout, stderr })
        : reject(new Error(`${command} ${args.join(' ')} exited ${code}\n${stdout}\n${stderr}`)),
    );
  });
}

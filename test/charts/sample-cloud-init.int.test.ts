// The GCP/AWS sample cloud-init's credential steps, filled in by the operator's own fill
// function and run by a real sh and openssl, then checked by Squid's real basic_ncsa_auth:
// a hand-set password may hold any character a Secret allows, quotes included.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { SAMPLE_CREDENTIALS_FILE, SQUID_CLOUD_INIT } from '../../charts/samples-chart.js';
import { credentialsProblem, fillCloudInit } from '../../handlers/proxy-credentials.js';

const PASSWD_FILE = '/etc/squid/proxy-operator.passwd';
const NCSA_AUTH = '/usr/lib/squid/basic_ncsa_auth';

interface CloudConfig {
  write_files: { path: string; content: string }[];
  runcmd: string[];
}

/** Runs the sample's credential steps in `dir` (paths moved there); returns the passwd file's path. */
function runCredentialSteps(credentials: { username: string; password: string }, dir: string): string {
  const config = parse(fillCloudInit(SQUID_CLOUD_INIT, credentials)) as CloudConfig;
  const moved = (text: string) =>
    text
      .replaceAll(SAMPLE_CREDENTIALS_FILE, join(dir, 'credentials'))
      .replaceAll(PASSWD_FILE, join(dir, 'passwd'));
  const file = config.write_files.find((f) => f.path === SAMPLE_CREDENTIALS_FILE);
  if (!file) throw new Error(`the sample writes no ${SAMPLE_CREDENTIALS_FILE}`);
  writeFileSync(join(dir, 'credentials'), file.content, { mode: 0o600 });
  // chown, chmod and systemctl need a VM; the steps that touch the credentials do not.
  for (const step of config.runcmd.filter((c) => c.includes(SAMPLE_CREDENTIALS_FILE))) {
    const run = spawnSync('/bin/sh', ['-c', moved(step)], { encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`step failed (${run.status}): ${run.stderr}`);
  }
  return join(dir, 'passwd');
}

/** What Squid's helper answers for these credentials (Squid sends them URL-escaped). */
function ncsaAuth(passwd: string, username: string, password: string): string {
  const run = spawnSync(NCSA_AUTH, [passwd], {
    input: `${encodeURIComponent(username)} ${encodeURIComponent(password)}\n`,
    encoding: 'utf8',
  });
  return run.stdout.trim();
}

describe('the sample cloud-init hashes any valid hand-set credentials correctly', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'sample-cloud-init-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it.each<[string, string, string]>([
    ['generated (URL-safe)', 'proxy-0a1b2c3d4e5f', 'Zm9vYmFyYmF6cXV4LV8xMjM0'],
    ['a single quote', "o'brien", "it's"],
    ['double quotes and a dollar', 'crawler', '"$HOME" and $(id)'],
    ['backticks and backslashes', 'crawler', '`id`\\n\\'],
    ['a hash and YAML indicators', 'crawler', '# not a comment: - [x] {y} &a *b |'],
    ['leading and trailing spaces', 'crawler', '  padded  '],
    ['non-ASCII and percent signs', 'crawler', 'é%41ü'],
  ])('with %s', (_case, username, password) => {
    expect(credentialsProblem({ username, password })).toBeUndefined(); // a Secret the operator accepts
    const passwd = runCredentialSteps({ username, password }, dir);
    expect(ncsaAuth(passwd, username, password)).toBe('OK');
    expect(ncsaAuth(passwd, username, `${password}x`)).toMatch(/^ERR/);
    // The clear-text copy is gone once hashed.
    expect(existsSync(join(dir, 'credentials'))).toBe(false);
  });
});

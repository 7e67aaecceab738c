import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { KubeConfig } from '@kubernetes/client-node';
import { ensureBinaries, type ControlPlaneBinaries, type Progress } from './binaries.js';

export interface ControlPlaneOptions {
  binaries?: ControlPlaneBinaries;
  progress?: Progress;
  /** How long each component may take to become healthy. */
  startTimeoutMs?: number;
  /**
   * Prefix of its folder under the temporary directory, chosen by the caller (the framework
   * names no product); abandoned folders with this prefix are reaped at start.
   */
  dirPrefix?: string;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const insecure = new Agent({ connect: { rejectUnauthorized: false } });

async function waitHealthy(
  url: string,
  child: ChildProcess,
  name: string,
  timeoutMs: number,
  log: () => string,
) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}:\n${log()}`);
    try {
      const res = await request(url, { dispatcher: insecure, signal: AbortSignal.timeout(2000) });
      await res.body.dump();
      if (res.statusCode === 200) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`${name} did not become healthy at ${url} within ${timeoutMs} ms:\n${log()}`);
}

function spawnLogged(bin: string, args: string[]): { child: ChildProcess; log: () => string } {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (b: Buffer) => {
    tail = (tail + b.toString()).slice(-6000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, log: () => tail };
}

async function terminate(child: ChildProcess | undefined, graceMs = 5000): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

const DEFAULT_DIR_PREFIX = 'control-plane-';
const OWNER_FILE = 'owner.pid';
const CHILDREN_FILE = 'children.pids';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Kills the etcd/apiserver of control planes whose owning process died without cleaning up
 * (a SIGKILLed test run never reaches its teardown), and removes their folders.
 */
export async function reapAbandoned(dirPrefix: string = DEFAULT_DIR_PREFIX): Promise<number> {
  let reaped = 0;
  for (const name of await readdir(tmpdir())) {
    if (!name.startsWith(dirPrefix)) continue;
    const dir = join(tmpdir(), name);
    const owner = Number(await readFile(join(dir, OWNER_FILE), 'utf8').catch(() => '0'));
    if (!owner || alive(owner)) continue;
    const children = (await readFile(join(dir, CHILDREN_FILE), 'utf8').catch(() => ''))
      .split('\n')
      .map(Number)
      .filter((pid) => pid > 0);
    for (const pid of children) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    await rm(dir, { recursive: true, force: true });
    reaped++;
  }
  return reaped;
}

const live = new Set<ControlPlane>();
process.once('exit', () => {
  for (const cp of live) cp.killNow();
});

/**
 * A real etcd + kube-apiserver on loopback, with a token-authenticated admin kubeconfig.
 * Used by the test suites and by the local demo.
 */
export class ControlPlane {
  private etcd?: ChildProcess;
  private apiserver?: ChildProcess;
  private apiserverArgs: string[] = [];

  private constructor(
    readonly dir: string,
    readonly binaries: ControlPlaneBinaries,
    readonly securePort: number,
    readonly token: string,
    private readonly startTimeoutMs: number,
  ) {}

  get server(): string {
    return `https://127.0.0.1:${this.securePort}`;
  }

  get kubeconfigPath(): string {
    return join(this.dir, 'kubeconfig');
  }

  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const progress = options.progress ?? (() => {});
    const dirPrefix = options.dirPrefix ?? DEFAULT_DIR_PREFIX;
    await reapAbandoned(dirPrefix);
    const binaries = options.binaries ?? (await ensureBinaries(progress));
    const dir = await mkdtemp(join(tmpdir(), dirPrefix));
    await writeFile(join(dir, OWNER_FILE), String(process.pid));
    const [etcdClient, etcdPeer, secure] = [await freePort(), await freePort(), await freePort()];
    const cp = new ControlPlane(
      dir,
      binaries,
      secure,
      randomBytes(24).toString('hex'),
      options.startTimeoutMs ?? 60_000,
    );
    live.add(cp);
    try {
      await cp.boot(etcdClient, etcdPeer, progress);
    } catch (err) {
      await cp.stop();
      throw err;
    }
    return cp;
  }

  private async boot(etcdClient: number, etcdPeer: number, progress: Progress): Promise<void> {
    const certDir = join(this.dir, 'certs');
    await mkdir(certDir, { recursive: true });
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const saKey = join(this.dir, 'sa.key');
    const saPub = join(this.dir, 'sa.pub');
    await writeFile(saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    await writeFile(saPub, publicKey.export({ type: 'spki', format: 'pem' }));
    const tokens = join(this.dir, 'tokens.csv');
    await writeFile(tokens, `${this.token},admin,admin-uid,"system:masters"\n`);

    progress(`starting etcd on 127.0.0.1:${etcdClient}`);
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = spawnLogged(this.binaries.etcd, [
      `--data-dir=${join(this.dir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    this.etcd = etcd.child;
    await this.recordChild(etcd.child);
    await waitHealthy(`${etcdUrl}/health`, etcd.child, 'etcd', this.startTimeoutMs, etcd.log);

    this.apiserverArgs = [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      `--secure-port=${this.securePort}`,
      `--cert-dir=${certDir}`,
      `--token-auth-file=${tokens}`,
      '--authorization-mode=RBAC',
      '--allow-privileged=true',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--disable-admission-plugins=ServiceAccount',
      `--service-account-issuer=https://127.0.0.1:${this.securePort}/`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      '--profiling=false',
      '--v=0',
    ];
    progress(`starting kube-apiserver on ${this.server}`);
    await this.startApiServer();
    await this.writeKubeconfig();
  }

  /** Starts (or restarts after stopApiServer) the API server on the same port and certificates. */
  async startApiServer(): Promise<void> {
    if (this.apiserver && this.apiserver.exitCode === null && this.apiserver.signalCode === null) return;
    const api = spawnLogged(this.binaries.kubeApiserver, this.apiserverArgs);
    this.apiserver = api.child;
    await this.recordChild(api.child);
    await waitHealthy(`${this.server}/readyz`, api.child, 'kube-apiserver', this.startTimeoutMs, api.log);
  }

  /** Remembered on disk so a later run can reap them if this process dies without stop(). */
  private async recordChild(child: ChildProcess): Promise<void> {
    if (child.pid) await appendFile(join(this.dir, CHILDREN_FILE), `${child.pid}\n`);
  }

  /** Stops only the API server (etcd keeps the data): for watch-recovery tests. */
  async stopApiServer(): Promise<void> {
    await terminate(this.apiserver);
  }

  private async writeKubeconfig(): Promise<void> {
    const ca = (await readFile(join(this.dir, 'certs', 'apiserver.crt'))).toString('base64');
    const yaml = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: local',
      '  cluster:',
      `    server: ${this.server}`,
      `    certificate-authority-data: ${ca}`,
      'users:',
      '- name: admin',
      '  user:',
      `    token: ${this.token}`,
      'contexts:',
      '- name: local',
      '  context: {cluster: local, user: admin, namespace: default}',
      'current-context: local',
      '',
    ].join('\n');
    await writeFile(this.kubeconfigPath, yaml, { mode: 0o600 });
  }

  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.kubeconfigPath);
    return kc;
  }

  killNow(): void {
    this.apiserver?.kill('SIGKILL');
    this.etcd?.kill('SIGKILL');
  }

  async stop(): Promise<void> {
    await terminate(this.apiserver);
    await terminate(this.etcd);
    live.delete(this);
    await rm(this.dir, { recursive: true, force: true });
  }
}

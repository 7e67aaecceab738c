import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { access, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const KUBERNETES_VERSION = '1.36.2';
export const ETCD_VERSION = '3.6.8';
const REQUIRED = ['kube-apiserver', 'etcd'] as const;
const RELEASES_INDEX =
  'https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml';

export interface ControlPlaneBinaries {
  dir: string;
  kubeApiserver: string;
  etcd: string;
  /** kubectl is optional: only the demo's printed commands and some tests use it. */
  kubectl?: string;
  source: 'KUBEBUILDER_ASSETS' | 'store' | 'download' | 'build';
}

export type Progress = (message: string) => void;

/** The setup-envtest store folder, shared with anyone who ran `setup-envtest use 1.36.2`. */
export function storeDir(version = KUBERNETES_VERSION): string {
  const dataHome = process.env.XDG_DATA_HOME || join(homedir(), '.local', 'share');
  return join(dataHome, 'kubebuilder-envtest', 'k8s', `${version}-linux-amd64`);
}

async function executable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function complete(
  dir: string,
  source: ControlPlaneBinaries['source'],
): Promise<ControlPlaneBinaries | undefined> {
  for (const name of REQUIRED) if (!(await executable(join(dir, name)))) return undefined;
  const kubectl = join(dir, 'kubectl');
  return {
    dir,
    source,
    kubeApiserver: join(dir, 'kube-apiserver'),
    etcd: join(dir, 'etcd'),
    kubectl: (await executable(kubectl)) ? kubectl : undefined,
  };
}

/**
 * Finds or obtains etcd and kube-apiserver, in this order: $KUBEBUILDER_ASSETS, the
 * setup-envtest store, the envtest release archive (sha512-verified), a build from source
 * with Go. Whatever is downloaded or built lands in the store so the next run is instant.
 */
export async function ensureBinaries(progress: Progress = () => {}): Promise<ControlPlaneBinaries> {
  const attempts: string[] = [];
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) {
    const found = await complete(assets, 'KUBEBUILDER_ASSETS');
    if (found) return found;
    attempts.push(`$KUBEBUILDER_ASSETS=${assets} lacks ${REQUIRED.join(' or ')}`);
  } else attempts.push('$KUBEBUILDER_ASSETS is not set');

  const store = storeDir();
  const stored = await complete(store, 'store');
  if (stored) return stored;
  attempts.push(`the setup-envtest store ${store} is empty`);

  try {
    await download(store, progress);
    const got = await complete(store, 'download');
    if (got) return got;
    attempts.push('the downloaded archive lacked the binaries');
  } catch (err) {
    attempts.push(`download of the envtest ${KUBERNETES_VERSION} archive failed: ${(err as Error).message}`);
  }

  try {
    await buildFromSource(store, progress);
    const built = await complete(store, 'build');
    if (built) return built;
    attempts.push('the Go build finished without installing the binaries');
  } catch (err) {
    attempts.push(`building from source with Go failed: ${(err as Error).message}`);
  }

  throw new Error(
    [
      `cannot obtain kube-apiserver ${KUBERNETES_VERSION} and etcd ${ETCD_VERSION}:`,
      ...attempts.map((a) => `  - ${a}`),
      'Options: (1) set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd;',
      `(2) run \`setup-envtest use ${KUBERNETES_VERSION}\` to fill ${store};`,
      '(3) give this machine internet access so the envtest release archive can be downloaded;',
      '(4) install Go >= 1.26 with access to a Go module proxy so they can be built from source.',
    ].join('\n'),
  );
}

async function download(store: string, progress: Progress): Promise<void> {
  const signal = AbortSignal.timeout(15_000);
  const index = await fetch(RELEASES_INDEX, { signal });
  if (!index.ok) throw new Error(`GET ${RELEASES_INDEX}: HTTP ${index.status}`);
  const text = await index.text();
  const archiveName = `envtest-v${KUBERNETES_VERSION}-linux-amd64.tar.gz`;
  const at = text.indexOf(`${archiveName}:`);
  if (at < 0) throw new Error(`${archiveName} is not in the release index`);
  const entry = text.slice(at, at + 2000);
  const hash = /hash:\s*([0-9a-f]{128})/.exec(entry)?.[1];
  const link = /selfLink:\s*(\S+)/.exec(entry)?.[1];
  if (!hash || !link) throw new Error(`the release index entry for ${archiveName} has no hash or selfLink`);
  progress(`downloading ${link}`);
  const res = await fetch(link, { signal: AbortSignal.timeout(600_000) });
  if (!res.ok) throw new Error(`GET ${link}: HTTP ${res.status}`);
  const body = Buffer.from(await res.arrayBuffer());
  const actual = createHash('sha512').update(body).digest('hex');
  if (actual !== hash) throw new Error(`sha512 mismatch for ${archiveName}: expected ${hash}, got ${actual}`);
  const work = await mkdtemp(join(tmpdir(), 'envtest-download-'));
  try {
    const archive = join(work, archiveName);
    await writeFile(archive, body);
    await run('tar', ['-xzf', archive, '-C', work], progress);
    await mkdir(store, { recursive: true });
    for (const name of [...REQUIRED, 'kubectl']) {
      const from = join(work, 'controller-tools', 'envtest', name);
      if (await executable(from)) await rename(from, join(store, name));
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function buildFromSource(store: string, progress: Progress): Promise<void> {
  const here = dirname(fileURLToPath(import.meta.url));
  // The script sits beside this module's TypeScript source; compiled code runs from build/.
  const candidates = [
    join(here, 'build-control-plane.sh'),
    join(here, '..', '..', '..', 'framework', 'control-plane', 'build-control-plane.sh'),
  ];
  let script: string | undefined;
  for (const c of candidates) {
    try {
      await readFile(c);
      script = c;
      break;
    } catch {
      /* try the next location */
    }
  }
  if (!script) throw new Error('build-control-plane.sh not found');
  progress(`building from source with Go into ${store} (a cold build takes several minutes on two cores)`);
  await run('bash', [script, store], progress, { K8S_VERSION: KUBERNETES_VERSION, ETCD_VERSION });
}

function run(
  cmd: string,
  args: string[],
  progress: Progress,
  env: Record<string, string> = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const started = Date.now();
    const ticker = setInterval(
      () => progress(`still working (${Math.round((Date.now() - started) / 1000)} s)`),
      30_000,
    );
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      tail = (tail + text).slice(-4000);
      for (const line of text.split('\n')) if (line.startsWith('[control-plane build]')) progress(line);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (err) => {
      clearInterval(ticker);
      reject(err);
    });
    child.on('exit', (code) => {
      clearInterval(ticker);
      if (code === 0) resolve();
      else
        reject(
          new Error(
            `${cmd} ${args.join(' ')} exited ${code}: ${tail.trim().split('\n').slice(-5).join(' | ')}`,
          ),
        );
    });
  });
}

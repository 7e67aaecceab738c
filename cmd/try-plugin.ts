// `npm run try-plugin -- <plugin folder> --type=<type> [--settings='<json>'] [--no-wait]`:
// a provider plugin against the demo's control plane (a real etcd + kube-apiserver on
// loopback, the CRD applied), with the real operator (build/cmd/operator.js) loading the
// plugin from a providers file, and one Managed Proxy of the plugin's type. It prints the
// Proxy until the provider has answered (a providerID in status), then waits for Ctrl-C
// with the kubeconfig printed, or exits with --no-wait. Not part of the image.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { ControlPlane, freePort } from '../framework/control-plane/index.js';
import { OPERATOR_RUNTIME_ENV } from '../charts/operator-chart.js';
import { API_VERSION, GROUP, KIND, PLURAL, VERSION, type Proxy } from '../crds/proxy-types.js';
import { applyCRDs } from './demo/environment.js';
import { interrupted } from './interrupted.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const NAMESPACE = 'default';
const PROVIDER = 'try';
const USAGE =
  "usage: npm run try-plugin -- <plugin folder or module> --type=<its provider type> [--settings='<json block>'] [--no-wait] [--seconds=60]";

const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

const pluginArg = process.argv.slice(2).find((a) => !a.startsWith('--'));
if (process.argv.includes('--help')) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (!pluginArg) fail('try-plugin: name the plugin (a folder with a package.json, or a module file)');
const type = flag('type') ?? fail('try-plugin: --type=<the type its @provider declares> is required');
let settings: unknown = {};
try {
  settings = JSON.parse(flag('settings') ?? '{}');
} catch (err) {
  fail(`try-plugin: --settings is not JSON: ${(err as Error).message}`);
}
const seconds = Number(flag('seconds') ?? 60);
if (!Number.isFinite(seconds) || seconds <= 0) fail('try-plugin: --seconds must be a positive number');
const wait = !process.argv.includes('--no-wait');
const say = (line: string) => process.stdout.write(`${line}\n`);

const cp = await ControlPlane.start({ progress: (m) => process.stderr.write(`[control-plane] ${m}\n`) });
const dir = await mkdtemp(join(tmpdir(), 'try-plugin-'));
let exitCode = 0;
const operator = { stop: async () => undefined as void };
try {
  await applyCRDs(cp.kubeConfig(), join(root, 'dist/crds.yaml'));
  const providersFile = join(dir, 'providers.yaml');
  await writeFile(
    providersFile,
    stringify({ plugins: [resolve(pluginArg)], providers: [{ name: PROVIDER, type, [type]: settings }] }),
  );
  say(`== providers file (${providersFile}) ==\n${await readFile(providersFile, 'utf8')}`);
  const child = spawn(
    process.execPath,
    [
      join(root, 'build/cmd/operator.js'),
      `--kubeconfig=${cp.kubeconfigPath}`,
      `--providers-config=${providersFile}`,
      '--leader-elect=false',
      // Its own namespace, where it keeps its credentials key: the demo's control plane has no
      // proxy-operator-system, and without the key no Managed proxy is reconciled.
      '--leader-election-namespace=default',
      `--metrics-address=127.0.0.1:${await freePort()}`,
      `--discovery-address=127.0.0.1:${await freePort()}`,
      '--discovery-unauthenticated=true',
    ],
    {
      // The gateway (on by default, at 0.0.0.0:8888) on loopback, on a free port: a run while
      // anything else holds 8888 failed, and nothing here needs the gateway on the network.
      env: {
        ...process.env,
        ...OPERATOR_RUNTIME_ENV,
        GATEWAY_ADDRESS: '127.0.0.1:0',
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      },
      stdio: 'inherit',
    },
  );
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  operator.stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };

  const proxy: Proxy = {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: 'try-plugin', namespace: NAMESPACE },
    spec: { mode: 'Managed', provider: PROVIDER, port: 3128, maxLeases: 1, rotation: {} },
  } as Proxy;
  const api = cp.kubeConfig().makeApiClient(CustomObjectsApi);
  const target = { group: GROUP, version: VERSION, namespace: NAMESPACE, plural: PLURAL };
  // The CRD serves a moment after its apply.
  for (let attempt = 0; ; attempt++) {
    try {
      await api.createNamespacedCustomObject({ ...target, body: proxy });
      break;
    } catch (err) {
      if (attempt >= 20) throw err;
      await sleep(500);
    }
  }
  say(`== a Managed Proxy of provider "${PROVIDER}" (type ${type}) ==\n${stringify(proxy)}`);

  const deadline = Date.now() + seconds * 1000;
  let last = '';
  for (;;) {
    const code = child.exitCode;
    if (code !== null) throw new Error(`the operator exited with ${code} (its log is above)`);
    const current = (await api.getNamespacedCustomObject({ ...target, name: 'try-plugin' })) as Proxy;
    const line = `phase=${current.status?.phase ?? '-'} providerID=${current.status?.providerID ?? '-'} ip=${current.status?.ip || '-'}`;
    if (line !== last) say((last = line));
    if (current.status?.providerID) break;
    if (Date.now() > deadline) throw new Error(`no providerID in status after ${seconds} s`);
    await sleep(500);
  }
  say(`== the provider answered: the plugin works with the operator ==`);
  if (wait) {
    say(`$ export KUBECONFIG=${cp.kubeconfigPath}`);
    say(`$ ${cp.binaries.kubectl ?? 'kubectl'} get px -o yaml`);
    say('Press Ctrl-C to stop and clean everything up.');
    await interrupted();
  }
} catch (err) {
  exitCode = 1;
  process.stderr.write(`try-plugin failed: ${(err as Error).message}\n`);
} finally {
  await operator.stop();
  await cp.stop();
  await rm(dir, { recursive: true, force: true });
}
process.exit(exitCode);

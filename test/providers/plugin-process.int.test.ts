import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';
import { runOperator, runOperatorIn, until, untilReady } from '../harness/operator-process.js';

// Out-of-tree plugins in the real operator process (cmd/operator.ts through the harness's
// TypeScript hooks, as `npm start` runs it): loaded from the providers file at start-up,
// reconciling a Proxy, closed on SIGTERM; a broken plugin stops start-up.
const root = fileURLToPath(new URL('../..', import.meta.url));
const kc = testKubeConfig();
const namespace = uniqueName('plugins');
let dir: string;

beforeAll(async () => {
  await installProxyCrd(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  dir = await mkdtemp(join(tmpdir(), 'plugin-process-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('provider plugins in the operator process', () => {
  it('loads the plugins the providers file lists, reconciles a Proxy on one, and closes them on SIGTERM', async () => {
    // The example plugin as an init container would deliver it: a folder outside the
    // operator's tree, with no node_modules of its own.
    const pluginDir = join(dir, 'plugins/directory');
    await cp(join(root, 'examples/provider-plugin/src'), pluginDir, { recursive: true });
    const state = join(dir, 'instances');
    const closed = join(dir, 'closed.log');
    const providers = join(dir, 'providers.yaml');
    await writeFile(
      providers,
      [
        'plugins:',
        '  - ./plugins/directory/index.ts',
        `  - ${join(root, 'test/providers/plugins/close-recorder.ts')}`,
        'providers:',
        '  - name: files',
        '    type: directory',
        `    directory: { path: ${state}, provisioningSeconds: 0 }`,
        '  - name: recorder',
        '    type: close-recorder',
        `    close-recorder: { file: ${closed} }`,
        '',
      ].join('\n'),
    );
    const serving = await runOperatorIn(namespace, {
      leaderElection: false,
      flags: ['--providers-config', providers],
    });
    const op = serving.process;
    try {
      await untilReady(serving);
      expect(op.output()).toMatch(/"providers":\["files","recorder"\][^\n]*providers configured/);

      const api = new ProxyApi(kc, namespace);
      await api.create('on-a-plugin', { spec: { mode: 'Managed', provider: 'files' } });
      const providerID = await until('the plugin to create the instance', async () => {
        const p = await api.get('on-a-plugin');
        return p.status?.providerID ?? undefined;
      });
      expect(await readdir(state)).toContain(`${providerID}.json`);

      op.child.kill('SIGTERM');
      expect(await op.exited).toBe(0);
      expect(await readFile(closed, 'utf8')).toBe('closed recorder\n');
    } finally {
      op.child.kill('SIGKILL');
    }
  });

  it('refuses to start when a listed plugin is missing, naming it (exit 2)', async () => {
    const providers = join(dir, 'broken.yaml');
    await writeFile(providers, 'plugins:\n  - ./plugins/hetzner.js\nproviders: []\n');
    const op = runOperator(['--providers-config', providers]);
    expect(await op.exited).toBe(2);
    expect(op.output()).toContain(
      `${providers}: plugins[0] "./plugins/hetzner.js": not found: no file or folder at ${join(dir, 'plugins/hetzner.js')}`,
    );
  });
});

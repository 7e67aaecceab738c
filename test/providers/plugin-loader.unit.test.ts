import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import { ProvidersConfigError } from '../../providers/config-reader.js';
import { PluginLoadError } from '../../providers/plugin-loader.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const fixtures = join(root, 'test/providers/plugins');
const example = join(root, 'examples/provider-plugin/src/index.ts');
const logger = pino({ level: 'silent' });
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'plugins-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Writes a providers file into the temp folder; plugin paths in `plugins` are relative to it. */
async function providersFile(plugins: string[], providers = 'providers: []\n'): Promise<string> {
  const path = join(dir, `${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(path, `plugins:\n${plugins.map((p) => `  - ${JSON.stringify(p)}\n`).join('')}${providers}`);
  return path;
}
const rel = (absolute: string) => relative(dir, absolute);

describe('a plugin listed in the providers file', () => {
  it('is loaded from a path relative to the file; its type is then configurable and builds', async () => {
    const state = join(dir, 'state');
    const path = await providersFile(
      [rel(example).startsWith('.') ? rel(example) : `./${rel(example)}`],
      `providers:\n  - name: files\n    type: directory\n    directory: { path: ${state}, provisioningSeconds: 0 }\n`,
    );
    const registry = builtinProviderRegistry();
    const entries = await registry.load(path);
    expect(registry.types()).toEqual(['aws', 'directory', 'gcp', 'kubernetes', 'mock']);
    expect(entries.map((e) => [e.name, e.type])).toEqual([['files', 'directory']]);
    const metrics = new Registry();
    const set = await registry.build(entries, { logger, metrics });
    const id = await set.get('files')!.create({
      uid: 'u-1',
      proxy: 'ns/p',
      namespace: 'ns',
      owner: 'o',
      port: 3128,
      placement: {},
    });
    await expect(set.get('files')!.get(id)).resolves.toMatchObject({ state: 'Running', ip: '127.0.0.1' });
    expect(JSON.parse(await readFile(join(state, `${id}.json`), 'utf8'))).toMatchObject({
      id,
      proxy: 'ns/p',
    });
    // Its own metric lands in the operator's registry.
    expect(
      await metrics.getSingleMetricAsString('proxy_operator_directory_instances_created_total'),
    ).toContain('provider="files"} 1');
  });

  it("is loaded from a folder through its package.json's entry point", async () => {
    const path = await providersFile(
      [rel(join(fixtures, 'folder-plugin'))],
      'providers:\n  - name: rec\n    type: close-recorder\n    close-recorder: { file: /tmp/x }\n',
    );
    const registry = builtinProviderRegistry();
    await expect(registry.load(path)).resolves.toHaveLength(1);
    expect(registry.types()).toContain('close-recorder');
  });

  it("is loaded by npm package name from the operator's own node_modules", async () => {
    // What `npm install <plugin>` in the operator's folder (or image) leaves behind.
    const name = `proxy-operator-provider-fixture-${process.pid}`;
    const installed = join(root, 'node_modules', name);
    await symlink(join(fixtures, 'folder-plugin'), installed, 'dir');
    try {
      const registry = builtinProviderRegistry();
      await registry.load(
        await providersFile(
          [name],
          'providers:\n  - name: rec\n    type: close-recorder\n    close-recorder: { file: /tmp/x }\n',
        ),
      );
      expect(registry.types()).toContain('close-recorder');
    } finally {
      await rm(installed, { force: true });
    }
  });

  it('may be given by an absolute path', async () => {
    const registry = builtinProviderRegistry();
    await registry.load(await providersFile([join(fixtures, 'close-recorder.ts')]));
    expect(registry.types()).toContain('close-recorder');
  });

  const failures: Array<[string, () => string[], string | RegExp]> = [
    [
      'a path with nothing there',
      () => ['./no-such-plugin.js'],
      /: not found: no file or folder at .*no-such-plugin\.js$/,
    ],
    [
      'a folder with no entry point',
      () => [rel(join(fixtures, 'empty-folder'))],
      /: not found: the folder .*empty-folder has no index\.js$/,
    ],
    [
      'an npm package that is not installed',
      () => ['proxy-operator-provider-nowhere'],
      ': not found: no npm package "proxy-operator-provider-nowhere" is installed next to the operator',
    ],
    [
      'an npm package that is no plugin',
      () => ['yaml'],
      /: exports no provider class declared with @provider\(\{ type, config \}\) \(exports: .*parseDocument/,
    ],
    [
      'a module exporting no provider class',
      () => [rel(join(fixtures, 'no-provider.ts'))],
      '(exports: NotAProvider, version)',
    ],
    [
      'a module that throws while loading',
      () => [rel(join(fixtures, 'throws-on-load.ts'))],
      ': failed to load: plugin exploded while loading',
    ],
    [
      'a provider type the operator already has',
      () => [rel(join(fixtures, 'duplicate-mock.ts'))],
      /: provider type "mock" of plugin ".*duplicate-mock\.ts" \(AnotherMock\) is already registered by built-in \(MockProvider\)$/,
    ],
    [
      'a type two plugins both declare',
      () => [join(fixtures, 'close-recorder.ts'), rel(join(fixtures, 'folder-plugin'))],
      /plugins\[1\] ".*folder-plugin": provider type "close-recorder" of plugin ".*folder-plugin" \(CloseRecorder\) is already registered by plugin ".*close-recorder\.ts"/,
    ],
    [
      'a name that is neither path nor package',
      () => ['My Plugin!'],
      ': neither a path (start it with ./, ../ or /) nor an npm package name',
    ],
  ];

  it.each(failures)(
    'stops start-up on %s, naming the file and the plugin',
    async (_case, plugins, message) => {
      const list = plugins();
      const path = await providersFile(list);
      const err = await builtinProviderRegistry()
        .load(path)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(PluginLoadError);
      expect(err).toBeInstanceOf(ProvidersConfigError);
      const text = (err as Error).message;
      const index = list.length - 1;
      expect(text.startsWith(`${path}: plugins[${index}] "${list[index]}"`)).toBe(true);
      if (typeof message === 'string') expect(text).toContain(message);
      else expect(text).toMatch(message);
    },
  );

  it("stops start-up when the plugin's config reader rejects an entry's block, naming the plugin", async () => {
    const spec = join(fixtures, 'close-recorder.ts');
    const path = await providersFile([spec], 'providers:\n  - name: rec\n    type: close-recorder\n');
    await expect(builtinProviderRegistry().load(path)).rejects.toThrow(
      `${path}: providers[0] (rec): close-recorder.file: required string (type "close-recorder" from plugin "${spec}")`,
    );
  });

  it('names the plugin when its config reader fails without ConfigObject.fail()', async () => {
    const state = join(dir, 'state-2');
    const spec = example;
    // The example's reader rejects a relative path with block.fail(); a thrown Error is named too.
    const path = await providersFile(
      [spec],
      `providers:\n  - name: files\n    type: directory\n    directory: { path: relative/${state} }\n`,
    );
    await expect(builtinProviderRegistry().load(path)).rejects.toThrow(
      `providers[0] (files): directory.path: "relative/${state}" must be an absolute path (type "directory" from plugin "${spec}")`,
    );
  });
});

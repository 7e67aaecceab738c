import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { OPERATOR_RUNTIME_ENV } from '../../charts/operator-chart.js';

// The production build and the image carry product code only: tests and their harness stay out.
const root = fileURLToPath(new URL('../..', import.meta.url));
const PRODUCT = [
  'framework',
  'crds',
  'providers',
  'health',
  'book',
  'discovery',
  'gateway',
  'handlers',
  'charts',
  'cmd',
];

function parsedConfig(file: string): ts.ParsedCommandLine {
  const config = ts.getParsedCommandLineOfConfigFile(
    `${root}${file}`,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  return config!;
}

function buildInputs(): string[] {
  return parsedConfig('tsconfig.build.json').fileNames.map((f) => f.slice(root.length));
}

/** Every file of ours the image's compile reads: its inputs and all they import, as tsc resolves them. */
function imageProgramFiles(): string[] {
  const config = parsedConfig('tsconfig.image.json');
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  return program
    .getSourceFiles()
    .map((f) => f.fileName)
    .filter((f) => f.startsWith(root) && !f.includes('/node_modules/'))
    .map((f) => f.slice(root.length));
}

/** The Dockerfile's last stage (the runtime image). */
function runtimeStage(): string {
  const text = readFileSync(`${root}Dockerfile`, 'utf8');
  return text.slice(text.lastIndexOf('\nFROM '));
}

/** ENV KEY=value KEY="quoted value" lines of a stage. */
function envOf(stage: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of stage.split('\n').filter((l) => /^ENV\s/.test(l)))
    for (const m of line.slice(4).matchAll(/(\w+)=(?:"([^"]*)"|(\S+))/g)) env[m[1]] = m[2] ?? m[3];
  return env;
}

/** What a process started the given way reports: V8's heap cap and the malloc arena setting. */
function runtimeOf(run: (probeScript: string) => { command: string; env: NodeJS.ProcessEnv }): {
  heapLimit: number;
  arenas: string | undefined;
} {
  const dir = mkdtempSync(join(tmpdir(), 'runtime-probe-'));
  try {
    const script = join(dir, 'probe.cjs');
    writeFileSync(
      script,
      'process.stdout.write(JSON.stringify({ heapLimit: require("node:v8").getHeapStatistics().heap_size_limit, arenas: process.env.MALLOC_ARENA_MAX }))',
    );
    const { command, env } = run(script);
    const out = spawnSync('sh', ['-c', command], { env, encoding: 'utf8' });
    expect(out.stderr).toBe('');
    return JSON.parse(out.stdout) as { heapLimit: number; arenas: string | undefined };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const bare = { PATH: `${process.execPath.replace(/\/node$/, '')}:${process.env.PATH}` };

function dockerfileCopies(): string[] {
  return readFileSync(`${root}Dockerfile`, 'utf8')
    .split('\n')
    .filter((line) => /^COPY\s/.test(line) && !line.includes('--from='))
    .flatMap((line) => line.trim().split(/\s+/).slice(1, -1));
}

describe('the production build', () => {
  it('compiles no test code', () => {
    const inputs = buildInputs();
    expect(inputs.length).toBeGreaterThan(50);
    expect(inputs.filter((f) => f.startsWith('test/') || f.endsWith('.test.ts'))).toEqual([]);
  });

  it('compiles every product folder', () => {
    const folders = new Set(buildInputs().map((f) => f.split('/')[0]));
    for (const folder of PRODUCT) expect(folders).toContain(folder);
  });
});

describe('the image (Dockerfile)', () => {
  it('copies no tests into the build stage', () => {
    expect(dockerfileCopies().filter((src) => src === 'test' || src.startsWith('test/'))).toEqual([]);
  });

  it('copies every product folder the operator is compiled from', () => {
    expect(dockerfileCopies()).toEqual(expect.arrayContaining(PRODUCT));
  });
});

describe('the image carries the operator only', () => {
  const files = imageProgramFiles();
  const ignored = readFileSync(`${root}.dockerignore`, 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('#'));

  it('compiles the operator, its plugin API and every built-in provider', () => {
    expect(files).toEqual(expect.arrayContaining(['cmd/operator.ts', 'providers/plugin.ts']));
    for (const p of ['aws', 'gcp', 'kubernetes', 'mock']) expect(files).toContain(`providers/${p}/plugin.ts`);
  });

  it.each([
    'framework/testing/',
    'framework/control-plane/',
    'cmd/demo',
    'cmd/control-plane-setup',
    'cmd/try-plugin',
    'bench/',
    'test/',
    'examples/',
    'providers/conformance/',
  ])('nothing the operator imports lies under %s', (prefix) => {
    expect(files.filter((f) => f.startsWith(prefix))).toEqual([]);
  });

  it('the build context (.dockerignore) keeps the harness and the demo out, and holds every file the compile reads', () => {
    expect(ignored).toEqual(
      expect.arrayContaining(['framework/testing', 'framework/control-plane', 'cmd/demo*', 'test', 'bench']),
    );
    const excluded = (f: string) =>
      ignored.some((pattern) => {
        const re = new RegExp(
          `^${pattern
            .replace(/\./g, '\\.')
            .replace(/\*\*\//g, '(.*/)?')
            .replace(/\*/g, '[^/]*')}(/|$)`,
        );
        return re.test(f);
      });
    expect(files.filter(excluded)).toEqual([]);
  });

  it('the build stage compiles with tsconfig.image.json', () => {
    expect(readFileSync(`${root}Dockerfile`, 'utf8')).toMatch(/^RUN npx tsc -p tsconfig\.image\.json$/m);
  });
});

describe("every way of running the operator has the Deployment's memory settings", () => {
  const deployment = runtimeOf((script) => ({
    command: `node ${script}`,
    env: { ...bare, ...OPERATOR_RUNTIME_ENV },
  }));
  const plain = runtimeOf((script) => ({ command: `node ${script}`, env: bare }));

  it('the settings matter: without them V8 sizes its heap otherwise', () => {
    expect(deployment.arenas).toBe(OPERATOR_RUNTIME_ENV.MALLOC_ARENA_MAX);
    expect(plain.heapLimit).not.toBe(deployment.heapLimit);
  });

  it('the image (docker run) sets the same environment', () => {
    expect(envOf(runtimeStage())).toMatchObject(OPERATOR_RUNTIME_ENV);
    expect(
      runtimeOf((script) => ({ command: `node ${script}`, env: { ...bare, ...envOf(runtimeStage()) } })),
    ).toEqual(deployment);
  });

  it('npm start runs the operator with the same heap and malloc settings', () => {
    const start = (
      JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { scripts: Record<string, string> }
    ).scripts.start;
    const launch = start.split('&&').at(-1)!.trim();
    expect(launch).toMatch(/ build\/cmd\/operator\.js$/);
    expect(
      runtimeOf((script) => ({ command: launch.replace('build/cmd/operator.js', script), env: bare })),
    ).toEqual(deployment);
  });
});

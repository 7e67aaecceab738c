import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// The production build and the image carry product code only: tests and their harness stay out.
const root = fileURLToPath(new URL('../..', import.meta.url));
const PRODUCT = ['framework', 'crds', 'providers', 'health', 'discovery', 'handlers', 'charts', 'cmd'];

function buildInputs(): string[] {
  const config = ts.getParsedCommandLineOfConfigFile(
    `${root}tsconfig.build.json`,
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  return config!.fileNames.map((f) => f.slice(root.length));
}

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

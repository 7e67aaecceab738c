import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEPLOYED_CHARTS, KUSTOMIZATION_FILE, SAMPLES_CHART, synthesize } from '../../charts/app.js';

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

/** Every difference between two folders of synthesized YAML, as a sentence naming the file. */
async function staleFiles(fresh: string, committed: string): Promise<string[]> {
  const [want, have] = [await yamlFiles(fresh), await yamlFiles(committed)];
  const problems: string[] = [];
  for (const name of want) {
    if (!have.includes(name)) problems.push(`dist/${name} is missing`);
    else if ((await readFile(join(fresh, name), 'utf8')) !== (await readFile(join(committed, name), 'utf8')))
      problems.push(`dist/${name} differs from what charts/ synthesizes`);
  }
  for (const name of have) if (!want.includes(name)) problems.push(`dist/${name} is no longer synthesized`);
  return problems.map((p) => `${p}: run \`npm run synth\` and commit dist/`);
}

async function yamlFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
}

describe('the committed dist/ manifests', () => {
  let fresh: string;
  beforeAll(async () => {
    fresh = await mkdtemp(join(tmpdir(), 'proxy-operator-synth-'));
    // The same code path as `npm run synth` (with the default image), into a scratch folder.
    synthesize(fresh);
  });
  afterAll(() => rm(fresh, { recursive: true, force: true }));

  it('match what the charts synthesize now', async () => {
    expect(await staleFiles(fresh, DIST)).toEqual([]);
  });

  it.each([...DEPLOYED_CHARTS, SAMPLES_CHART].map((chart) => `${chart}.yaml`))(
    'include the chart file dist/%s',
    async (file) => {
      expect(await yamlFiles(fresh)).toContain(file);
    },
  );

  it(`include dist/${KUSTOMIZATION_FILE} for \`kubectl apply -k dist/\``, async () => {
    expect(await yamlFiles(fresh)).toContain(KUSTOMIZATION_FILE);
  });
});

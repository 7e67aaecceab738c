import { ESLint } from 'eslint';
import { fileURLToPath } from 'node:url';

// The layering table of docs/architecture.md is a lint rule: an import running up a layer fails `npm test`.
const root = fileURLToPath(new URL('../..', import.meta.url));
const eslint = new ESLint({ cwd: root });

async function layerErrors(file: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(`${source}\nexport const x = y;\n`, { filePath: `${root}${file}` });
  return result.messages.filter((m) => m.ruleId === 'layers/imports-downward').map((m) => m.message);
}

describe('layers/imports-downward', () => {
  it.each([
    ['health/probe.ts', "import { y } from '../handlers/proxy-controller.js';", 'handlers'],
    ['discovery/app.ts', "import { y } from '../framework/index.js';", 'framework'],
    ['framework/core/x.ts', "import { y } from '../../providers/contract.js';", 'providers'],
    ['providers/gcp/x.ts', "import { y } from '../../handlers/kinds.js';", 'handlers'],
    ['charts/names.ts', "import { y } from '../providers/kubernetes/config.js';", 'providers'],
    ['cmd/demo.ts', "import { y } from '../test/harness/kube.js';", 'test'],
    ['bench/health.ts', "export { y } from '../test/health/targets.js';", 'test'],
  ])('%s may not import %s', async (file, source, to) => {
    const errors = await layerErrors(file, source);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`may not import from ${to}/`);
  });

  it.each([
    ['cmd/demo.ts', "import { y } from '../framework/testing/control-plane.js';"],
    ['cmd/try-plugin.ts', "import { y } from '../framework/testing/index.js';"],
    ['handlers/x.ts', "import { y } from '../framework/testing/eventually.js';"],
  ])('%s may not import the test harness: %s', async (file, source) => {
    const errors = await layerErrors(file, source);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain('may not import the test harness framework/testing/');
  });

  it.each([
    ['handlers/x.ts', "import { y } from '../providers/contract.js';"],
    ['handlers/x.ts', "import { y } from '../framework/index.js';"],
    ['providers/gcp/x.ts', "import { y } from '../contract.js';"],
    ['providers/x.ts', "import { y } from '../crds/proxy-types.js';"],
    ['health/x.ts', "import { y } from './verdict.js';"],
    ['cmd/demo.ts', "import { y } from '../framework/control-plane/index.js';"],
    ['bench/crawl.ts', "import { y } from '../framework/testing/self-signed-cert.js';"],
    ['test/x.ts', "import { y } from '../handlers/kinds.js';"],
    ['framework/core/x.ts', "import { y } from '@kubernetes/client-node';"],
  ])('%s may import %s', async (file, source) => {
    expect(await layerErrors(file, source)).toEqual([]);
  });
});

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
    // The book's two doors never import each other, in either direction.
    ['discovery/app.ts', "import { y } from '../gateway/ports.js';", 'gateway'],
    ['gateway/forward-http.ts', "import { y } from '../discovery/bearer-auth.js';", 'discovery'],
    ['gateway/x.ts', "import type { y } from '../discovery/app.js';", 'discovery'],
    ['discovery/x.ts', "export { y } from '../gateway/gateway-server.js';", 'gateway'],
    // The book is below both doors.
    ['book/memory-lease-store.ts', "import { y } from '../discovery/api-error.js';", 'discovery'],
    ['book/x.ts', "import { y } from '../gateway/ports.js';", 'gateway'],
    ['book/x.ts', "import { y } from '../handlers/lease-book.js';", 'handlers'],
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
    ['book/lease-store.ts', "import type { Response } from 'express';", 'express'],
    ['book/x.ts', "import { createServer } from 'node:http';", 'node:http'],
    ['book/x.ts', "import { request } from 'undici';", 'undici'],
    ['book/x.ts', "import { KubeConfig } from '@kubernetes/client-node';", '@kubernetes/client-node'],
    ['discovery/x.ts', "import { CoreV1Api } from '@kubernetes/client-node';", '@kubernetes/client-node'],
    ['gateway/x.ts', "import { KubeConfig } from '@kubernetes/client-node';", '@kubernetes/client-node'],
    ['health/x.ts', "import { KubeConfig } from '@kubernetes/client-node';", '@kubernetes/client-node'],
  ])('%s may not import %s (a room that knows nothing of it)', async (file, source, name) => {
    const errors = await layerErrors(file, source);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`may not import ${name} `);
  });

  it.each([
    ['discovery/app.ts', "import { y } from '../book/lease-store.js';"],
    ['gateway/x.ts', "import type { y } from '../book/catalog.js';"],
    ['handlers/gateway-book.ts', "import { y } from '../gateway/ports.js';"],
    ['handlers/gateway-book.ts', "import { y } from '../book/api-tokens.js';"],
    ['book/redis-connection.ts', "import { Redis } from 'ioredis';"],
    ['discovery/app.ts', "import express from 'express';"],
    ['gateway/x.ts', "import { createServer } from 'node:http';"],
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

import { existsSync, readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import type { ControlPlane as ControlPlaneType } from './control-plane.js';

// Jest transpiles this file, but in ESM mode Node itself resolves the file's imports, and it
// knows neither the `.js` → `.ts` mapping nor TypeScript syntax (this harness uses parameter
// properties, which Node's type stripping rejects). These hooks teach it both, for this
// repository's own .ts files only, before the harness is imported.
const compilerOptions: ts.CompilerOptions = {
  module: ts.ModuleKind.ESNext,
  target: ts.ScriptTarget.ES2023,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  sourceMap: false,
  inlineSourceMap: true,
};

function isOwnTypeScript(url: string): boolean {
  return url.startsWith('file:') && url.endsWith('.ts') && !url.includes('/node_modules/');
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    const parent = context.parentURL;
    if (parent && isOwnTypeScript(parent) && specifier.startsWith('.') && specifier.endsWith('.js')) {
      const candidate = new URL(specifier.replace(/\.js$/, '.ts'), parent);
      if (!existsSync(new URL(specifier, parent)) && existsSync(candidate)) {
        return { url: candidate.href, format: 'module', shortCircuit: true };
      }
    }
    return nextResolve(specifier, context);
  },
  load(url, context, nextLoad) {
    if (!isOwnTypeScript(url)) return nextLoad(url, context);
    const path = fileURLToPath(url);
    const { outputText } = ts.transpileModule(readFileSync(path, 'utf8'), {
      compilerOptions,
      fileName: path,
    });
    return { format: 'module', source: outputText, shortCircuit: true };
  },
});

// One control plane per jest run, shared by every integration suite. A failure to start
// fails the run with the reason: integration tests are never silently skipped.
export default async function globalSetup(): Promise<void> {
  const { ControlPlane } = await import('./control-plane.js');
  const { KUBECONFIG_ENV } = await import('./kube.js');
  const cp: ControlPlaneType = await ControlPlane.start({
    progress: (m) => process.stderr.write(`[control-plane] ${m}\n`),
  });
  (globalThis as { __controlPlane?: ControlPlaneType }).__controlPlane = cp;
  process.env[KUBECONFIG_ENV] = cp.kubeconfigPath;
}

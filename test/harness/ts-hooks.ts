// Teaches Node to run this repository's TypeScript directly: resolves `./x.js` imports to
// `./x.ts` and transpiles (decorators and their metadata included, which Node's own type
// stripping cannot do). Loaded by the jest global setup, and with `node --import` by tests
// that run an entry point as a real process. Only erasable TypeScript in this file: Node
// loads it with its built-in type stripping.
import { existsSync, readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

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

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Every module specifier a TypeScript file imports or re-exports. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [
    ...text.matchAll(/(?:import|export)\s[^'"]*?from\s+'([^']+)'|import\s+'([^']+)'|import\('([^']+)'\)/g),
  ].map((m) => m[1] ?? m[2] ?? m[3]);
}

function sources(folder: string): string[] {
  return readdirSync(join(root, folder))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(root, folder, f));
}

describe('providers written as plugins', () => {
  it.each(sources('providers/aws'))(
    'the aws provider (%s) imports nothing of the operator but its plugin API',
    (file) => {
      const ours = importsOf(file).filter((s) => s.startsWith('.'));
      expect(ours.filter((s) => !s.startsWith('./') && s !== '../plugin.js')).toEqual([]);
    },
  );

  it.each(sources('examples/provider-plugin/src'))(
    'the example plugin (%s) reaches the operator only through proxy-operator/plugin',
    (file) => {
      const specifiers = importsOf(file);
      expect(specifiers.filter((s) => s.startsWith('../'))).toEqual([]);
      expect(specifiers.filter((s) => s.startsWith('proxy-operator'))).toEqual(
        specifiers.filter((s) => s === 'proxy-operator/plugin'),
      );
    },
  );
});

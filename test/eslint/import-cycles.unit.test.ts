import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// No import cycle in product code, type-only imports included: a cycle means two modules are
// one thing in two files, or a shared type lives in the wrong one (issue 50 item 4 moved
// ProxyCooldown from book/leasability.ts to the lease-store contract it describes).
const root = fileURLToPath(new URL('../..', import.meta.url));
const ROOMS = [
  'crds',
  'framework',
  'providers',
  'health',
  'book',
  'discovery',
  'gateway',
  'handlers',
  'charts',
  'cmd',
  'client/src',
];
const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s+'(\.[^']+)'/g;

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules') return [];
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** file → the files of ours it imports (relative specifiers, `.js` resolved to `.ts`). */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const deps = [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((m) =>
      normalize(join(dirname(file), m[1].replace(/\.js$/, '.ts'))),
    );
    graph.set(file, deps);
  }
  return graph;
}

/** The strongly connected components of more than one file (Tarjan). */
export function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('import cycles', () => {
  it('finds a type-only cycle (the check itself works)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['a.ts']],
      ['c.ts', ['a.ts']],
    ]);
    expect(cycles(graph)).toEqual([['a.ts', 'b.ts']]);
  });

  it('reads `import type` and multi-line imports as edges', () => {
    expect(
      [..."import type { A } from './a.js';\nimport {\n  B,\n} from '../b/b.js';".matchAll(IMPORT)].map(
        (m) => m[1],
      ),
    ).toEqual(['./a.js', '../b/b.js']);
  });

  it('product code has none', () => {
    const files = ROOMS.flatMap((room) => tsFiles(join(root, room)));
    expect(files.length).toBeGreaterThan(100);
    expect(cycles(importGraph(files)).map((c) => c.map((f) => relative(root, f)))).toEqual([]);
  });
});

// Keeps docs/framework.md honest: its code blocks are the example files' regions verbatim
// (the examples are type-checked with the project; docs-examples.int.test.ts runs them).
import { readFileSync } from 'node:fs';

const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

function dedent(text: string): string {
  const lines = text.replace(/\n+$/, '').split('\n');
  const indent = Math.min(...lines.filter((l) => l.trim()).map((l) => l.length - l.trimStart().length));
  return lines.map((l) => l.slice(indent)).join('\n');
}

function region(path: string, name: string): string {
  const m = new RegExp(`[ \\t]*// #region ${name}\\n([\\s\\S]*?)[ \\t]*// #endregion ${name}\\n`).exec(
    read(path),
  );
  if (!m) throw new Error(`${path} has no region ${name}`);
  return dedent(m[1]);
}

const quotes = [
  ...read('docs/framework.md').matchAll(/<!-- example: (\S+)#(\S+) -->\n\n```ts\n([\s\S]*?)\n```/g),
];

describe('docs/framework.md', () => {
  it('quotes the example files', () => {
    expect(quotes.length).toBeGreaterThanOrEqual(6);
    for (const [, path, name, code] of quotes)
      expect({ path, name, code }).toEqual({ path, name, code: region(path, name) });
  });
});

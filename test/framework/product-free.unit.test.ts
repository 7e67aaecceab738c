import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// framework/ is a general operator framework (kopf's place): it names no product, so another
// operator can take it as it is. The layering lint keeps its imports out of the product's
// rooms; this keeps the product's names out of its code and scripts (issue 50 item 4: the
// control-plane launcher and the test harness named it in their temp-folder prefixes).
// Comments may give the product's group as an example; code may not use it.
const root = fileURLToPath(new URL('../..', import.meta.url));
const PRODUCT_NAMES = /proxy-operator|proxy_operator|crawl\.example\.com/;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|sh)$/.test(name) ? [path] : [];
  });
}

/** The lines of a source file that are code, not comments (line and block comments dropped). */
export function codeLines(text: string): string[] {
  const withoutBlocks = text.replace(/\/\*[\s\S]*?\*\//g, (block) => block.replace(/[^\n]/g, ''));
  return withoutBlocks.split('\n').map((line) => line.replace(/(^|\s)(\/\/|#(?!!)).*$/, ''));
}

describe('framework/ names no product', () => {
  it('drops comments but keeps code', () => {
    expect(
      codeLines("const a = 'x'; // proxy-operator\n/* crawl.example.com */ b();\n# proxy-operator\nc"),
    ).toEqual(["const a = 'x';", ' b();', '', 'c']);
  });

  it.each(files(join(root, 'framework')).map((f) => [relative(root, f), f]))('%s', (_name, path) => {
    const hits = codeLines(readFileSync(path, 'utf8')).filter((line) => PRODUCT_NAMES.test(line));
    expect(hits).toEqual([]);
  });
});

// Issue 50 item 1: docs/benchmarks.md is today's figures, not a lab notebook: under 400
// lines, and every benchmark script has its section (command, baseline, latest, targets).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const page = readFileSync(join(ROOT, 'docs', 'benchmarks.md'), 'utf8');
const scripts = Object.keys(
  (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
    .scripts,
).filter((name) => name.startsWith('bench:'));

describe('docs/benchmarks.md', () => {
  it('stays under 400 lines (history lives in git)', () => {
    expect(page.split('\n').length).toBeLessThan(400);
  });

  it.each(scripts.map((s) => [s]))('has a section for npm run %s', (script) => {
    const headings = page.split('\n').filter((line) => line.startsWith('## '));
    expect(headings.some((h) => h.includes(`npm run ${script}\``))).toBe(true);
  });
});

// The repository's own markdown (README, docs/, the packages' READMEs), for the docs tests.
import { readdirSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Generated, installed or machine-local folders: not the project's documentation. */
const SKIP = new Set(['node_modules', 'build', 'dist', 'coverage']);

/** The markdown files under `dir`, as paths relative to the repository with '/' separators. */
export function markdownFiles(dir: string = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name.startsWith('.') || SKIP.has(entry.name)) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return markdownFiles(path);
    return entry.name.endsWith('.md') ? [relative(ROOT, path).split(sep).join('/')] : [];
  });
}

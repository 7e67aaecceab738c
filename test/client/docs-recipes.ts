// The plain-HTTP recipes of docs/crawling.md (the blocks marked `<!-- checked: curl -->` and
// `<!-- checked: python -->`), read from the page and run as a user would paste them: the unit
// test runs them against an in-process API, the demo test against `npm run demo`.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const DOCS = fileURLToPath(new URL('../../docs/crawling.md', import.meta.url));

export type Recipe = 'curl' | 'python';

/** The code of the fenced block right after `<!-- checked: <name> ... -->`. */
export function checkedBlock(name: string): string {
  const text = readFileSync(DOCS, 'utf8');
  const match = new RegExp(`<!-- checked: ${name}\\b[^>]*-->\\n\`\`\`\\w+\\n([\\s\\S]*?)\\n\`\`\``).exec(
    text,
  );
  if (!match) throw new Error(`docs/crawling.md has no block marked <!-- checked: ${name} -->`);
  return match[1];
}

/** This process's environment without proxy variables (the recipes must reach loopback directly). */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/_proxy$/i.test(k)));
  return { ...env, ...extra };
}

/** Runs a recipe to its end; rejects (with code, stdout, stderr) when it exits non-zero. */
export function runRecipe(
  recipe: Recipe,
  env: NodeJS.ProcessEnv,
): Promise<{ stdout: string; stderr: string }> {
  const code = checkedBlock(recipe);
  if (recipe === 'curl') return run('bash', ['-euo', 'pipefail', '-c', code], { env });
  return run('python3', ['-c', code], { env }).catch((err: { stderr?: string }) => {
    if (/No module named 'requests'/.test(err.stderr ?? '')) {
      throw new Error(
        'the Python example of docs/crawling.md needs requests: python3 -m pip install requests',
        {
          cause: err,
        },
      );
    }
    throw err;
  });
}

export interface RecipeFailure {
  code?: number;
  stdout?: string;
  stderr?: string;
}

/** Runs a recipe that must fail: resolves with its failure, rejects when it exits 0. */
export function failingRecipe(recipe: Recipe, env: NodeJS.ProcessEnv): Promise<RecipeFailure> {
  return runRecipe(recipe, env).then(
    ({ stdout }) => {
      throw new Error(`the ${recipe} recipe exited 0, printing: ${stdout}`);
    },
    (err: RecipeFailure) => err,
  );
}

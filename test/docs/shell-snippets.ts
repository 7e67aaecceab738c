// What the docs tests read out of markdown's shell snippets: pure functions over a page's text
// (test/docs/shell-snippets.unit.test.ts feeds them the repository's pages and fixtures).

export interface Snippet {
  /** The 1-based line the snippet starts on. */
  line: number;
  code: string;
}

const FENCE = /^(```|~~~)(\S*)[^\n]*\n([\s\S]*?)^\1\s*$/gm;
const SHELLS = new Set(['sh', 'bash', 'shell']);

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Fenced blocks marked sh, bash or shell: what a reader pastes into a shell. */
export function shellBlocks(text: string): Snippet[] {
  return [...text.matchAll(FENCE)]
    .filter((m) => SHELLS.has(m[2]!))
    .map((m) => ({ line: lineOf(text, m.index) + 1, code: m[3]! }));
}

/**
 * A block with its `<placeholders>` filled by a word: a reader replaces `<your release>` before
 * running it, so the placeholder's own characters (an apostrophe, a space) are not the shell's.
 */
export function placeholdersFilled(code: string): string {
  return code.replace(/<[A-Za-z][^<>\n]*>/g, 'PLACEHOLDER');
}

/** A block's logical lines (backslash continuations joined), each with the line it starts on. */
function logicalLines(code: string, firstLine: number): Snippet[] {
  const out: Snippet[] = [];
  let pending: Snippet | undefined;
  for (const [i, physical] of code.split('\n').entries()) {
    const part = physical.endsWith('\\') ? physical.slice(0, -1) : physical;
    pending = pending
      ? { line: pending.line, code: `${pending.code} ${part}` }
      : { line: firstLine + i, code: part };
    if (!physical.endsWith('\\')) {
      out.push(pending);
      pending = undefined;
    }
  }
  if (pending) out.push(pending);
  return out;
}

/**
 * Every curl command the page shows: in any fenced block (a transcript's `$ curl` too), its
 * backslash-continued lines joined, and in inline code.
 */
export function curlCommands(text: string): Snippet[] {
  const out: Snippet[] = [];
  let prose = text;
  for (const m of text.matchAll(FENCE)) {
    for (const { line, code } of logicalLines(m[3]!, lineOf(text, m.index) + 1))
      for (const c of code.matchAll(/(?:^|[\s$(;|&`])(curl\s[^\n;|&)]*)/g))
        out.push({ line, code: c[1]!.trim() });
    // Blanked, keeping its newlines: the inline code below is looked for outside blocks.
    prose = prose.replace(m[0], (block) => block.replace(/[^\n]/g, ' '));
  }
  for (const m of prose.matchAll(/`([^`]+)`/g))
    if (/^curl\s/.test(m[1]!)) out.push({ line: lineOf(prose, m.index), code: m[1]!.replace(/\s+/g, ' ') });
  return out.sort((a, b) => a.line - b.line);
}

/** Whether the command sends through a proxy (`-x`, `--proxy`). */
export function throughAProxy(command: string): boolean {
  return /(^|\s)(-x|--proxy)(\s|=|$)/.test(command);
}

/**
 * Whether the command keeps its proxy for every host: curl skips `-x` for a host the
 * environment's NO_PROXY names (silently fetching it directly), unless `--noproxy ''` says
 * no host is exempt.
 */
export function keepsItsProxy(command: string): boolean {
  return /(^|\s)--noproxy\s+(''|"")(\s|$)/.test(command);
}

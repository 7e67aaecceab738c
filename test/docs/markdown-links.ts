// The link checker behind test/docs/links.unit.test.ts: a pure function over markdown texts
// (the test reads the repository; the table test feeds it fixtures). Anchors follow GitHub's
// rendering: a heading's slug (lower case, punctuation dropped, spaces to '-', '-1', '-2' for
// repeats) and explicit `<a id>` / `<a name>` anchors.
import { posix } from 'node:path';

export type LinkProblemKind = 'missing_file' | 'missing_anchor' | 'malformed_url';

export interface LinkProblem {
  file: string;
  line: number;
  target: string;
  kind: LinkProblemKind;
}

export interface Link {
  line: number;
  target: string;
}

/** GitHub's anchor slugger: one instance per document, since repeated headings get a suffix. */
export function slugger(): (heading: string) => string {
  const seen = new Map<string, number>();
  return (heading) => {
    const text = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link in a heading renders as its text
      .replace(/<[^>]+>/g, '')
      .trim()
      .toLowerCase();
    const base = text.replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return n === 0 ? base : `${base}-${n}`;
  };
}

/** The lines outside fenced code blocks, with inline code spans blanked (links there are text). */
function proseLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((raw, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(raw)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return;
    }
    if (fence === undefined) out.push({ line: i + 1, text: raw.replace(/(`+)[^`]*?\1/g, '') });
  });
  return out;
}

/** Every anchor a document offers: heading slugs and explicit `<a id|name="…">`. */
export function anchorsOf(markdown: string): Set<string> {
  const slug = slugger();
  const anchors = new Set<string>();
  let fence: string | undefined;
  for (const raw of markdown.split('\n')) {
    const marker = /^\s*(`{3,}|~{3,})/.exec(raw)?.[1];
    if (marker && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(raw);
    if (heading) anchors.add(slug(heading[1]));
    for (const m of raw.matchAll(/<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["']/gi)) anchors.add(m[1]);
  }
  return anchors;
}

/** Every link target of a document: inline links and images, reference definitions, autolinks, `<a href>`. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const { line, text } of proseLines(markdown)) {
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g))
      links.push({ line, target: m[1] });
    const definition = /^ {0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$/.exec(text);
    if (definition) links.push({ line, target: definition[1] });
    for (const m of text.matchAll(/<(https?:\/\/[^>\s]+)>/g)) links.push({ line, target: m[1] });
    for (const m of text.matchAll(/<a\s[^>]*\bhref\s*=\s*["']([^"']+)["']/gi))
      links.push({ line, target: m[1] });
  }
  return links;
}

function wellFormedURL(target: string): boolean {
  try {
    const url = new URL(target);
    return url.hostname !== '' && !/\s/.test(target);
  } catch {
    return false;
  }
}

export interface Repository {
  /** The markdown files to check, by repository-relative path, with their text. */
  markdown: ReadonlyMap<string, string>;
  /** Whether a repository-relative path (a file or a folder) exists. */
  exists(path: string): boolean;
}

/**
 * Every broken link of the markdown files: a relative target that names no file or folder,
 * an `#anchor` its markdown target does not define (GitHub's `#L12` line anchors allowed on
 * other files), an external URL that does not parse. External URLs are never fetched.
 */
export function brokenLinks(repo: Repository): LinkProblem[] {
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (path: string) => {
    let set = anchorCache.get(path);
    if (!set) anchorCache.set(path, (set = anchorsOf(repo.markdown.get(path) ?? '')));
    return set;
  };
  const problems: LinkProblem[] = [];
  for (const [file, text] of repo.markdown) {
    for (const { line, target } of linksOf(text)) {
      const problem = (kind: LinkProblemKind) => problems.push({ file, line, target, kind });
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
        if (/^mailto:/i.test(target)) continue;
        if (!/^https?:/i.test(target) || !wellFormedURL(target)) problem('malformed_url');
        continue;
      }
      const hash = target.indexOf('#');
      const rawPath = hash === -1 ? target : target.slice(0, hash);
      const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const path =
        rawPath === ''
          ? file
          : posix
              .normalize(
                rawPath.startsWith('/')
                  ? decodeURIComponent(rawPath.slice(1))
                  : posix.join(posix.dirname(file), decodeURIComponent(rawPath)),
              )
              .replace(/\/$/, '');
      if (path.startsWith('..') || !(repo.markdown.has(path) || repo.exists(path))) {
        problem('missing_file');
        continue;
      }
      if (anchor === undefined) continue;
      const known = path.endsWith('.md') ? anchors(path).has(anchor) : /^L\d+(-L\d+)?$/.test(anchor);
      if (!known) problem('missing_anchor');
    }
  }
  return problems;
}

// Issue 50 item 2: the decision records and their index agree, and every record names the
// code or test that embodies it. Pure over the files' text, so the rules are table-tested.

export type RecordProblemKind =
  | 'not_listed'
  | 'listed_but_missing'
  | 'duplicate_number'
  | 'gap_in_numbers'
  | 'bad_title'
  | 'index_title_differs'
  | 'no_area'
  | 'no_embodied_in'
  | 'embodied_path_missing';

export interface RecordProblem {
  record: string;
  kind: RecordProblemKind;
  detail?: string;
}

export interface DecisionDocs {
  /** File name (`NNNN-title.md`) → its text. */
  records: ReadonlyMap<string, string>;
  /** The text of docs/decisions/README.md. */
  index: string;
  /** Whether a repository-relative path exists (file or folder). */
  exists: (path: string) => boolean;
}

const RECORD_FILE = /^(\d{4})-[a-z0-9-]+\.md$/;

/** The backticked paths of a record's `**Embodied in:**` paragraph. */
export function embodiedPaths(text: string): string[] | undefined {
  const at = text.indexOf('**Embodied in:**');
  if (at < 0) return undefined;
  const paragraph = text.slice(at).split(/\n\s*\n/)[0];
  return [...paragraph.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
}

export function recordProblems(docs: DecisionDocs): RecordProblem[] {
  const problems: RecordProblem[] = [];
  const names = [...docs.records.keys()].filter((f) => RECORD_FILE.test(f)).sort();
  const listed = new Map<string, string>();
  for (const m of docs.index.matchAll(/\[([^\]]+)\]\((\d{4}-[^)\s]+\.md)\)/g)) listed.set(m[2], m[1]);
  for (const target of listed.keys())
    if (!docs.records.has(target)) problems.push({ record: target, kind: 'listed_but_missing' });

  const numbers = names.map((n) => Number(n.slice(0, 4)));
  numbers.forEach((n, i) => {
    if (numbers.indexOf(n) !== i) problems.push({ record: names[i], kind: 'duplicate_number' });
  });
  const distinct = [...new Set(numbers)];
  distinct.forEach((n, i) => {
    if (n !== i + 1)
      problems.push({
        record: names[numbers.indexOf(n)],
        kind: 'gap_in_numbers',
        detail: `expected ${i + 1}`,
      });
  });

  for (const name of names) {
    const text = docs.records.get(name) ?? '';
    const title = /^# (\d{4})\. (.+)$/m.exec(text.split('\n')[0] ?? '');
    if (!title || title[1] !== name.slice(0, 4)) problems.push({ record: name, kind: 'bad_title' });
    if (!listed.has(name)) problems.push({ record: name, kind: 'not_listed' });
    else if (title && listed.get(name) !== `${title[1]}. ${title[2]}`)
      problems.push({ record: name, kind: 'index_title_differs', detail: listed.get(name) });
    if (!/^Area: .+/m.test(text)) problems.push({ record: name, kind: 'no_area' });
    const paths = embodiedPaths(text);
    if (paths === undefined || paths.length === 0) problems.push({ record: name, kind: 'no_embodied_in' });
    for (const path of paths ?? [])
      if (!docs.exists(path)) problems.push({ record: name, kind: 'embodied_path_missing', detail: path });
  }
  return problems;
}

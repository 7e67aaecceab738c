// Issue 50 item 2: docs/decisions holds the lasting decisions only (30–50 records), its index
// and its records agree, and every record names the code or test that embodies it, so a
// rename that leaves a record describing code that is gone fails here.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { embodiedPaths, recordProblems, type DecisionDocs, type RecordProblem } from './decision-records.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIR = join(ROOT, 'docs', 'decisions');

const RECORD = (n: string, title: string, embodied = '**Embodied in:** `src/a.ts`, `test/a.test.ts`') =>
  `# ${n}. ${title}\n\nArea: Somewhere · [All decisions](README.md)\n\n**Decision.** x.\n\n${embodied}\n`;

function fixture(records: Record<string, string>, index: string): DecisionDocs {
  return {
    records: new Map(Object.entries(records)),
    index,
    exists: (path) => ['src/a.ts', 'test/a.test.ts', 'src'].includes(path),
  };
}

const GOOD = {
  '0001-one.md': RECORD('0001', 'One'),
  '0002-two.md': RECORD('0002', 'Two'),
};
const GOOD_INDEX = '# Decisions\n\n- [0001. One](0001-one.md): x\n- [0002. Two](0002-two.md): y\n';

describe('the decision-record check', () => {
  it('passes records that agree with their index and name existing paths', () => {
    expect(recordProblems(fixture(GOOD, GOOD_INDEX))).toEqual([]);
  });

  it.each<[string, Record<string, string>, string, RecordProblem]>([
    [
      'a record not in the index',
      { ...GOOD, '0003-three.md': RECORD('0003', 'Three') },
      GOOD_INDEX,
      { record: '0003-three.md', kind: 'not_listed' },
    ],
    [
      'an index entry with no record',
      GOOD,
      `${GOOD_INDEX}- [0003. Three](0003-three.md)\n`,
      { record: '0003-three.md', kind: 'listed_but_missing' },
    ],
    [
      'a number used twice',
      { ...GOOD, '0002-deux.md': RECORD('0002', 'Deux') },
      `${GOOD_INDEX}- [0002. Deux](0002-deux.md)\n`,
      { record: '0002-two.md', kind: 'duplicate_number' },
    ],
    [
      'a gap in the numbers',
      { '0001-one.md': GOOD['0001-one.md'], '0003-three.md': RECORD('0003', 'Three') },
      '- [0001. One](0001-one.md)\n- [0003. Three](0003-three.md)\n',
      { record: '0003-three.md', kind: 'gap_in_numbers', detail: 'expected 2' },
    ],
    [
      "a title whose number is not the file's",
      { ...GOOD, '0002-two.md': RECORD('0007', 'Two') },
      GOOD_INDEX,
      { record: '0002-two.md', kind: 'bad_title' },
    ],
    [
      "an index title that differs from the record's",
      GOOD,
      GOOD_INDEX.replace('0002. Two', '0002. Too'),
      { record: '0002-two.md', kind: 'index_title_differs', detail: '0002. Too' },
    ],
    [
      'a record with no area line',
      { ...GOOD, '0002-two.md': RECORD('0002', 'Two').replace(/^Area: .*$/m, '') },
      GOOD_INDEX,
      { record: '0002-two.md', kind: 'no_area' },
    ],
    [
      'a record naming no code',
      { ...GOOD, '0002-two.md': RECORD('0002', 'Two', 'Nothing named.') },
      GOOD_INDEX,
      { record: '0002-two.md', kind: 'no_embodied_in' },
    ],
    [
      'a record naming a path that is gone',
      { ...GOOD, '0002-two.md': RECORD('0002', 'Two', '**Embodied in:** `src/a.ts`, `src/gone.ts`') },
      GOOD_INDEX,
      { record: '0002-two.md', kind: 'embodied_path_missing', detail: 'src/gone.ts' },
    ],
  ])('reports %s', (_name, records, index, problem) => {
    expect(recordProblems(fixture(records, index))).toContainEqual(problem);
  });

  it('reads the paths of the Embodied-in paragraph only, across its lines', () => {
    const text = 'Uses `elsewhere.ts`.\n\n**Embodied in:** `a.ts`,\n`b/c.ts`\n\nLater `d.ts`.\n';
    expect(embodiedPaths(text)).toEqual(['a.ts', 'b/c.ts']);
  });
});

describe("the repository's decision records", () => {
  const names = readdirSync(DIR).filter((f) => /^\d{4}-.*\.md$/.test(f));
  const docs: DecisionDocs = {
    records: new Map(names.map((f) => [f, readFileSync(join(DIR, f), 'utf8')])),
    index: readFileSync(join(DIR, 'README.md'), 'utf8'),
    exists: (path) => existsSync(join(ROOT, path)),
  };

  it('keeps the lasting decisions only: 30 to 50 records', () => {
    expect(names.length).toBeGreaterThanOrEqual(30);
    expect(names.length).toBeLessThanOrEqual(50);
  });

  it('agree with their index, and each names existing code or tests', () => {
    expect(recordProblems(docs)).toEqual([]);
  });
});

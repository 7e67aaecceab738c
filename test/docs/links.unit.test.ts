// Issue 26 item 8: every link of the repository's markdown resolves — relative links to a file
// or folder that exists, #anchors to a heading or <a id> of their page — and external URLs are
// well formed (never fetched: the tests have no internet).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { anchorsOf, brokenLinks, linksOf, slugger, type LinkProblem } from './markdown-links.js';
import { markdownFiles, ROOT } from './repository-markdown.js';

function fixture(files: Record<string, string>, others: string[] = []) {
  return {
    markdown: new Map(Object.entries(files)),
    exists: (path: string) => others.includes(path),
  };
}

describe('the link checker', () => {
  const docs = fixture(
    {
      'README.md': [
        '# Project',
        '## Getting started',
        '<a id="custom"></a>',
        'See [start](#getting-started), [custom](#custom), [guide](docs/guide.md#the-api-v1),',
        '[source](src/main.ts#L3), [folder](src/) and [home](https://example.com/x).',
        '```sh',
        'echo [not a link](nowhere.md)',
        '```',
        'Inline code is not a link either: `[x](nowhere.md)`.',
      ].join('\n'),
      'docs/guide.md': '# Guide\n\n## The API (`/v1`)\n\nBack to [the top](../README.md#project).\n',
    },
    ['src', 'src/main.ts'],
  );

  it('passes a set of pages whose every link resolves', () => {
    expect(brokenLinks(docs)).toEqual([]);
  });

  it.each<[string, string, LinkProblem['kind']]>([
    ['a missing file', '[gone](docs/gone.md)', 'missing_file'],
    ['a missing file with an anchor', '[gone](docs/gone.md#x)', 'missing_file'],
    ['a missing source file', '[code](src/other.ts)', 'missing_file'],
    ['a link leaving the repository', '[out](../elsewhere.md)', 'missing_file'],
    ['a missing anchor on the same page', '[here](#no-such-heading)', 'missing_anchor'],
    ['a missing anchor on another page', '[there](docs/guide.md#no-such-heading)', 'missing_anchor'],
    ['an anchor that is not a line on a source file', '[code](src/main.ts#main)', 'missing_anchor'],
    ['a malformed URL', '[web](https://)', 'malformed_url'],
    ['an unknown scheme', '[web](htps:/example.com)', 'malformed_url'],
  ])('reports %s', (_name, link, kind) => {
    const broken = fixture({ ...Object.fromEntries(docs.markdown), 'page.md': `# Page\n\ntext ${link}\n` }, [
      'src',
      'src/main.ts',
    ]);
    expect(brokenLinks(broken)).toEqual([
      { file: 'page.md', line: 3, target: /\((.*)\)/.exec(link)?.[1], kind },
    ]);
  });

  it('reports a broken file link and a broken anchor of one page together', () => {
    const broken = fixture({ 'a.md': '# A\n\n[b](b.md) and [self](#nope)\n' });
    expect(brokenLinks(broken)).toEqual([
      { file: 'a.md', line: 3, target: 'b.md', kind: 'missing_file' },
      { file: 'a.md', line: 3, target: '#nope', kind: 'missing_anchor' },
    ]);
  });

  it.each([
    ['Getting started', 'getting-started'],
    ['Caveats — read these two', 'caveats--read-these-two'],
    [
      'Dead proxies are replaced (`--replace-unhealthy-after`)',
      'dead-proxies-are-replaced---replace-unhealthy-after',
    ],
    ['The AWS provider’s error table', 'the-aws-providers-error-table'],
    ['Plain HTTP (any language)', 'plain-http-any-language'],
    ['ProxyPoolNoHealthyProxies', 'proxypoolnohealthyproxies'],
  ])('slugs %j as GitHub does: #%s', (heading, slug) => {
    expect(slugger()(heading)).toBe(slug);
  });

  it('numbers repeated headings as GitHub does', () => {
    expect([...anchorsOf('# A\n## Notes\n## Notes\n## Notes\n')]).toEqual([
      'a',
      'notes',
      'notes-1',
      'notes-2',
    ]);
  });

  it('finds inline links, reference definitions, autolinks and <a href>', () => {
    const text =
      '[a](x.md "title") ![img](i.png)\n[ref]: y.md\n<https://example.com>\n<a href="z.md">z</a>\n';
    expect(linksOf(text).map((l) => l.target)).toEqual([
      'x.md',
      'i.png',
      'y.md',
      'https://example.com',
      'z.md',
    ]);
  });
});

describe("the repository's markdown", () => {
  const files = markdownFiles(ROOT);
  const markdown = new Map(files.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')]));

  it('includes the README, every page of docs/ and the other READMEs', () => {
    for (const f of ['README.md', 'docs/architecture.md', 'docs/decisions/README.md', 'docs/runbooks.md'])
      expect(files).toContain(f);
    expect(files).toEqual(expect.arrayContaining(['client/README.md', 'plugin-template/README.md']));
    expect(files.filter((f) => f.startsWith('docs/decisions/')).length).toBeGreaterThan(30);
  });

  it('has no broken link', () => {
    expect(brokenLinks({ markdown, exists: (path) => existsSync(join(ROOT, path)) })).toEqual([]);
  });

  it('lists every decision record in docs/decisions/README.md, each number once', () => {
    const records = files
      .filter((f) => /^docs\/decisions\/\d{4}-.*\.md$/.test(f))
      .map((f) => f.slice('docs/decisions/'.length));
    const index = markdown.get('docs/decisions/README.md') ?? '';
    const listed = linksOf(index).map((l) => l.target);
    expect(records.filter((r) => !listed.includes(r))).toEqual([]);
    const numbers = records.map((r) => r.slice(0, 4));
    expect(numbers.filter((n, i) => numbers.indexOf(n) !== i)).toEqual([]);
    for (const r of records)
      expect(markdown.get(`docs/decisions/${r}`)).toMatch(new RegExp(`^# ${r.slice(0, 4)}\\. `));
  });

  it("points every alert's runbook_url at a section of docs/runbooks.md", () => {
    const rules = readFileSync(join(ROOT, 'dist/monitoring/prometheus-rules.yaml'), 'utf8');
    const urls = [...rules.matchAll(/runbook_url:\s*['"]?(\S+?)['"]?\s*$/gm)].map((m) => m[1]);
    expect(urls.length).toBeGreaterThan(5);
    const anchors = anchorsOf(markdown.get('docs/runbooks.md') ?? '');
    for (const url of urls) {
      // The shipped dist/ names the page's path in the repository (charts/monitoring/alert-rules.ts).
      const [, path, anchor] = /^([^:#]+)#(.+)$/.exec(url) ?? [];
      expect({ url, path, found: anchors.has(anchor) }).toEqual({
        url,
        path: 'docs/runbooks.md',
        found: true,
      });
    }
  });
});

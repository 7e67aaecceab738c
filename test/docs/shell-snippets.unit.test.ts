// What a reader pastes from the docs runs as written: every shell block parses (a stray quote
// once left the README's port-forward recipe waiting for more input), and every curl through a
// proxy keeps that proxy whatever the reader's NO_PROXY says (curl fetches a host NO_PROXY names
// directly, even with -x, and says nothing: the site sees the crawler's own address).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { markdownFiles, ROOT } from './repository-markdown.js';
import {
  curlCommands,
  keepsItsProxy,
  placeholdersFilled,
  shellBlocks,
  throughAProxy,
  type Snippet,
} from './shell-snippets.js';

const page = (...lines: string[]) => lines.join('\n');

describe('reading snippets out of a page', () => {
  it.each<[string, string, Snippet[]]>([
    ['a sh block', page('text', '```sh', 'echo hi', '```'), [{ line: 3, code: 'echo hi\n' }]],
    ['a bash block', page('```bash', 'ls', '```'), [{ line: 2, code: 'ls\n' }]],
    ['not a python block', page('```python', 'print(1)', '```'), []],
    ['not a text block', page('```', '$ curl x', '```'), []],
  ])('shell blocks: %s', (_, text, blocks) => {
    expect(shellBlocks(text)).toEqual(blocks);
  });

  it.each<[string, string, string]>([
    ['a placeholder with an apostrophe', "IMAGE=<your Proxies' namespace> x", 'IMAGE=PLACEHOLDER x'],
    ['two placeholders', 'label pod <pod> owner=<cluster name>', 'label pod PLACEHOLDER owner=PLACEHOLDER'],
    ['a here-string stays', 'read -r A <<<"$OUT"', 'read -r A <<<"$OUT"'],
    ['a redirection stays', 'cat < in > out', 'cat < in > out'],
  ])('placeholders: %s', (_, code, filled) => {
    expect(placeholdersFilled(code)).toBe(filled);
  });

  it.each<[string, string, Snippet[]]>([
    [
      'a block',
      page('```sh', 'curl -x http://p:1 https://a/ -o /dev/null', '```'),
      [{ line: 2, code: 'curl -x http://p:1 https://a/ -o /dev/null' }],
    ],
    [
      'continued lines, joined, on their first line',
      page('```sh', 'OUT=$(curl -s \\', '  -x "$P" "$S") && X=1', 'echo', '```'),
      [{ line: 2, code: 'curl -s    -x "$P" "$S"' }],
    ],
    [
      'a transcript',
      page('```', "$ curl -s -x 'http://p:1' http://a/", 'hello', '```'),
      [{ line: 2, code: "curl -s -x 'http://p:1' http://a/" }],
    ],
    [
      'inline code, across a line break',
      page('try `curl -x http://p:1', '  -U u:p URL` then'),
      [{ line: 1, code: 'curl -x http://p:1 -U u:p URL' }],
    ],
    ['not a word ending in curl', page('`libcurl -x`'), []],
  ])('curl commands: %s', (_, text, commands) => {
    expect(curlCommands(text)).toEqual(commands);
  });

  it.each<[string, boolean, boolean]>([
    ["curl --noproxy '' -x http://p:1 URL", true, true],
    ['curl --noproxy "" --proxy http://p:1 URL', true, true],
    ['curl -x http://p:1 URL', true, false],
    ["curl --noproxy '*' -x http://p:1 URL", true, false],
    ['curl --proxy=http://p:1 URL', true, false],
    ['curl -sS -XPOST http://api/v1/leases', false, false],
    ['curl -U u:p --proxy-user u:p URL', false, false],
  ])('%s: through a proxy %s, keeps it %s', (command, through, keeps) => {
    expect(throughAProxy(command)).toBe(through);
    expect(keepsItsProxy(command)).toBe(keeps);
  });
});

const pages = markdownFiles().map((file) => ({ file, text: readFileSync(join(ROOT, file), 'utf8') }));

describe("the repository's pages", () => {
  const blocks = pages.flatMap(({ file, text }) =>
    shellBlocks(text).map((b) => ({ where: `${file}:${b.line}`, code: b.code })),
  );
  const curls = pages.flatMap(({ file, text }) =>
    curlCommands(text)
      .filter((c) => throughAProxy(c.code))
      .map((c) => ({ where: `${file}:${c.line}`, code: c.code })),
  );

  it('have shell blocks and curls through a proxy to check (the readers above find them)', () => {
    expect(blocks.length).toBeGreaterThan(20);
    expect(curls.length).toBeGreaterThan(5);
  });

  it.each(blocks)('$where parses as bash', ({ code }) => {
    expect(() =>
      execFileSync('bash', ['-n'], { input: placeholdersFilled(code), stdio: 'pipe' }),
    ).not.toThrow();
  });

  it.each(curls)("$where keeps its proxy whatever NO_PROXY says (--noproxy '')", ({ code }) => {
    expect(keepsItsProxy(code)).toBe(true);
  });
});

// The process's one source of client tokens: which tokens each setting gives, and the file
// watched while at least one door is open.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { tokenDigest } from '../../book/api-tokens.js';
import { createClientTokens } from '../../handlers/client-tokens.js';

const logger = pino({ level: 'silent' });
const A = 'team-a-token-0123456789abcdef';
const B = 'team-b-token-0123456789abcdef';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function tokensFile(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'client-tokens-')), 'tokens');
  writeFileSync(file, text);
  return file;
}

describe('createClientTokens', () => {
  it.each([
    ['no token: none (the API open, the gateway 407)', { token: '' }, undefined],
    ['whitespace only: none', { token: ' \n' }, undefined],
    ['DISCOVERY_TOKEN: one token named "default", trimmed', { token: ` ${A}\n` }, ['default']],
    [
      'a tokens file: its names',
      { token: '', tokensFile: tokensFile(`team-a: ${A}\nteam-b: ${B}\n`) },
      ['team-a', 'team-b'],
    ],
  ])('%s', (_, settings, names) => {
    const source = createClientTokens(settings, { registry: new Registry(), logger });
    expect(source.tokens?.names).toEqual(names);
  });

  it('an unusable file throws naming the file and line', () => {
    const file = tokensFile('team-a short\n');
    expect(() =>
      createClientTokens({ token: '', tokensFile: file }, { registry: new Registry(), logger }),
    ).toThrow(`${file}:1`);
  });

  it('registers the file metrics once, in the registry it is given', async () => {
    const registry = new Registry();
    createClientTokens({ token: '', tokensFile: tokensFile(`team-a: ${A}\n`) }, { registry, logger });
    expect((await registry.getMetricsAsJSON()).map((m) => m.name).sort()).toEqual([
      'proxy_operator_discovery_tokens_file_errors_total',
      'proxy_operator_discovery_tokens_file_usable',
    ]);
  });

  it('watches the file while any door is open, and stops when the last one closes', async () => {
    const file = tokensFile(`team-a: ${A}\n`);
    const source = createClientTokens(
      { token: '', tokensFile: file },
      { registry: new Registry(), logger, intervalMs: 20 },
    );
    const has = (token: string) => source.tokens?.nameOf(tokenDigest(token)) !== undefined;
    source.acquire(); // the API
    source.acquire(); // the gateway
    source.release(); // the API closes: the gateway still reads the file
    writeFileSync(file, `team-b: ${B}\n`);
    await sleep(150);
    expect([has(A), has(B)]).toEqual([false, true]);
    source.release(); // the last door closes: no more re-reads
    source.release(); // a second close is harmless
    writeFileSync(file, `team-a: ${A}\n`);
    await sleep(150);
    expect([has(A), has(B)]).toEqual([false, true]);
  });
});

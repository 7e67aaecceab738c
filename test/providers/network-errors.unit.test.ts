import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { classifyAwsError } from '../../providers/aws/error-mapping.js';
import { networkErrorSamples } from '../../providers/conformance/network-errors.js';
import { classifyGcpError } from '../../providers/gcp/error-mapping.js';
import { isNetworkError, networkErrorCode, NETWORK_ERROR_CODES } from '../../providers/plugin.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const coded = (code: string) => Object.assign(new Error(`failed: ${code}`), { code });
const looped = (() => {
  const err = coded('EWHATEVER') as Error & { cause?: unknown };
  err.cause = err;
  return err;
})();
const deep = [1, 2, 3, 4, 5].reduce<Error>(
  (inner) => new Error('wrapped', { cause: inner }),
  coded('ECONNRESET'),
);

describe('the shared network-error classifier', () => {
  it.each<[string, unknown, string | undefined]>([
    ['a refused connection', coded('ECONNREFUSED'), 'ECONNREFUSED'],
    ['a reset connection', coded('ECONNRESET'), 'ECONNRESET'],
    ['a name that does not resolve', coded('ENOTFOUND'), 'ENOTFOUND'],
    ["undici's socket error", coded('UND_ERR_SOCKET'), 'UND_ERR_SOCKET'],
    [
      "fetch's wrapper, by its cause",
      new TypeError('fetch failed', { cause: coded('ETIMEDOUT') }),
      'ETIMEDOUT',
    ],
    ['a file-system code is not a network failure', coded('ENOENT'), undefined],
    ['an error without a code', new Error('boom'), undefined],
    ['an HTTP status is not a network failure', { code: 503 }, undefined],
    ['a string', 'ECONNRESET', undefined],
    ['null', null, undefined],
    ['a cause cycle ends', looped, undefined],
    ['causes are followed only a few levels deep', deep, undefined],
  ])('%s', (_what, err, code) => {
    expect(networkErrorCode(err)).toBe(code);
    expect(isNetworkError(err)).toBe(code !== undefined);
  });

  it("the conformance kit's samples cover every code, each in three shapes", () => {
    const samples = networkErrorSamples();
    expect(samples).toHaveLength(NETWORK_ERROR_CODES.size * 3);
    for (const { error } of samples) expect(NETWORK_ERROR_CODES.has(networkErrorCode(error)!)).toBe(true);
  });

  it.each(networkErrorSamples())('aws and gcp call $label Transient', ({ error }) => {
    expect(classifyAwsError(error)).toBe('Transient');
    expect(classifyGcpError(error, 'get')).toBe('Transient');
  });

  it.each(['aws', 'gcp', 'kubernetes', 'mock'])(
    'the %s provider keeps no network code list of its own',
    (folder) => {
      const dir = join(root, 'providers', folder);
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts')))
        expect([file, /ECONNREFUSED|UND_ERR_SOCKET/.test(readFileSync(join(dir, file), 'utf8'))]).toEqual([
          file,
          false,
        ]);
    },
  );
});

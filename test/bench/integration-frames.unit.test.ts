// Which CPU-profile frames the crawl benchmark counts as the integration's (bench/crawl-scenario.ts).
import { describe, expect, it } from '@jest/globals';
import { isIntegration } from '../../bench/crawl-scenario.js';

describe("the integration's frames", () => {
  it.each<[string, string, boolean]>([
    ["the client's code", 'file:///repo/build/client/src/crawlee/session-leases.js', true],
    [
      'the undici package, which only the client uses',
      'file:///repo/node_modules/undici/lib/api/api-request.js',
      true,
    ],
    [
      "Node's own undici: the global dispatcher the package's request runs on",
      'node:internal/deps/undici/undici',
      true,
    ],
    ["Crawlee's code", 'file:///repo/node_modules/@crawlee/core/index.js', false],
    ["Node's http client, which got uses", 'node:_http_client', false],
    ['native frames', '', false],
  ])('%s: %s', (_, url, ours) => {
    expect(isIntegration(url)).toBe(ours);
  });
});

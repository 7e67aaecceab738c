import { describe, expect, it } from '@jest/globals';
import { pino } from 'pino';
import { describeProviderConformance, networkErrorSamples } from 'proxy-operator/conformance';
import { classifyError } from '../src/error-mapping.js';
import { MemoryProvider } from '../src/index.js';

// The operator's conformance kit against this provider. A provider with no remote backend has
// no `unresponsive` or `failing` one to give: the kit skips those two cases and says so.
describeProviderConformance({
  name: 'memory (plugin template)',
  provider: () =>
    new MemoryProvider(
      'memory',
      { address: '127.0.0.1', provisioningSeconds: 60 },
      pino({ level: 'silent' }),
    ),
  unknownID: 'proxy-000000000000',
  provisionsVisibly: true,
});

describe('the error mapping', () => {
  it.each(networkErrorSamples())('$label is Transient', ({ error }) => {
    expect(classifyError(error)).toBe('Transient');
  });

  it.each([
    [404, 'NotFound'],
    [429, 'QuotaExceeded'],
    [403, 'Permanent'],
    [503, 'Transient'],
  ])('HTTP %i is %s', (status, kind) => {
    expect(classifyError({ status })).toBe(kind);
  });
});

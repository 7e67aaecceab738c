import { pino } from 'pino';
import { describeProviderConformance } from '../../../providers/conformance/index.js';
import type { FaultKind } from '../../../providers/mock/faults.js';
import { MockProvider } from '../../../providers/mock/mock-provider.js';

const logger = pino({ level: 'silent' });

/** Every call of every operation fails with `kind` (the mock has no network to cut). */
const always = (kind: FaultKind) => {
  const fault = { kind, count: 1_000_000 };
  return { create: fault, get: fault, delete: fault, listByTag: fault };
};

describeProviderConformance({
  name: 'mock',
  provider: () => new MockProvider('mock', { provisioningSeconds: 60 }, logger),
  unknownID: 'proxy-000000000000',
  unresponsive: () => new MockProvider('mock', { faults: always('hang') }, logger),
  failing: () => new MockProvider('mock', { faults: always('transient') }, logger),
  provisionsVisibly: true,
});

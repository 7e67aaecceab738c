import type { ConfigObject } from '../config-reader.js';
import type { ProviderOperation } from '../errors.js';
import { FAULT_KINDS, FAULT_OPERATIONS, type Fault } from './faults.js';
import { parseCidr } from './ip-range.js';

export interface MockSettings {
  /** How long an instance stays Provisioning before it runs. */
  provisioningSeconds: number;
  /** Run a real forward proxy on a loopback address per Running instance. */
  serveTraffic: boolean;
  /** Where fake IPs come from when serveTraffic is off. */
  ipRange: string;
  /** Failures the provider starts with, per operation. */
  faults: Partial<Record<ProviderOperation, Fault>>;
}

export const MOCK_DEFAULTS = {
  provisioningSeconds: 5,
  serveTraffic: false,
  ipRange: '10.99.0.0/16',
} as const;

/**
 * Reads the `mock:` block:
 *   mock: { provisioningSeconds: 5, serveTraffic: false, ipRange: 10.99.0.0/16,
 *           faults: { create: { kind: quota, count: 2 } } }
 */
export function parseMockConfig(block: ConfigObject): MockSettings {
  const ipRange = block.string('ipRange', MOCK_DEFAULTS.ipRange);
  const parsed = parseCidr(ipRange);
  if (typeof parsed === 'string') block.fail('ipRange', parsed);

  const faultsBlock = block.object('faults');
  const faults: Partial<Record<ProviderOperation, Fault>> = {};
  for (const op of FAULT_OPERATIONS) {
    const fault = faultsBlock.optionalObject(op);
    if (!fault) continue;
    faults[op] = {
      kind: fault.oneOf('kind', FAULT_KINDS),
      count: fault.number('count', 1, { integer: true, min: 1 }),
    };
  }
  return {
    provisioningSeconds: block.number('provisioningSeconds', MOCK_DEFAULTS.provisioningSeconds, { min: 0 }),
    serveTraffic: block.boolean('serveTraffic', MOCK_DEFAULTS.serveTraffic),
    ipRange,
    faults,
  };
}

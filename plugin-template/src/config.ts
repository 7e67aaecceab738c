import type { ConfigObject } from 'proxy-operator/plugin';

/** The `memory:` block of a provider entry (the key is the type name). */
export interface MemorySettings {
  /** The address every instance reports once Running. */
  address: string;
  /** How long a new instance stays Provisioning. */
  provisioningSeconds: number;
}

/** Reads and checks the block; block.fail() names the file, the entry and the key. */
export function parseMemoryConfig(block: ConfigObject): MemorySettings {
  return {
    address: block.string('address', '127.0.0.1'),
    provisioningSeconds: block.number('provisioningSeconds', 0, { min: 0 }),
  };
}

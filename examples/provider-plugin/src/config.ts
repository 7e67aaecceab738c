import { isAbsolute } from 'node:path';
import { isIP } from 'node:net';
import type { ConfigObject } from 'proxy-operator/plugin';

/** The `directory:` block of a provider entry. */
export interface DirectorySettings {
  /** The folder holding one JSON file per instance (the "cloud"). */
  path: string;
  /** How long a new instance stays Provisioning. */
  provisioningSeconds: number;
  /** The address every Running instance reports. */
  address: string;
  /** Simulated API latency per call: how a slow cloud feels (and what an abort cuts short). */
  latencyMillis: number;
}

/** Reads and checks the block; block.fail() names the file, the entry and the key. */
export function parseDirectoryConfig(block: ConfigObject): DirectorySettings {
  const path = block.requiredString('path');
  if (!isAbsolute(path)) block.fail('path', `"${path}" must be an absolute path`);
  const address = block.string('address', '127.0.0.1');
  if (!isIP(address)) block.fail('address', `"${address}" is not an IP address`);
  return {
    path,
    provisioningSeconds: block.number('provisioningSeconds', 5, { min: 0 }),
    address,
    latencyMillis: block.number('latencyMillis', 0, { integer: true, min: 0 }),
  };
}

import { stringify } from 'yaml';
import { PROXIES_NAMESPACE, SQUID_IMAGE } from './names.js';

/** One entry of the providers file (providers/config.ts): name, type and that type's block. */
export interface ProviderConfigEntry {
  name: string;
  type: string;
  [typeBlock: string]: unknown;
}

/** The `--providers-config` file's text for these entries. */
export function providersYaml(entries: readonly ProviderConfigEntry[]): string {
  return stringify({ providers: entries });
}

/**
 * Shipped with the Deployment: needs no cloud account. `kubernetes` runs real Squid Pods in
 * the cluster (so in-cluster health probes can reach them); `mock` fakes instances.
 */
export const DEFAULT_PROVIDERS: readonly ProviderConfigEntry[] = [
  {
    name: 'kubernetes',
    type: 'kubernetes',
    kubernetes: { namespace: PROXIES_NAMESPACE, image: SQUID_IMAGE },
  },
  { name: 'mock', type: 'mock' },
];

/** The sample for a real fleet: one gcp instance per region, next to the defaults. */
export const GCP_SAMPLE_PROVIDERS: readonly ProviderConfigEntry[] = [
  ...DEFAULT_PROVIDERS,
  {
    name: 'gcp-eu',
    type: 'gcp',
    gcp: { project: 'my-gcp-project', network: 'default', networkTags: ['proxy'] },
  },
  {
    name: 'gcp-us',
    type: 'gcp',
    gcp: { project: 'my-gcp-project', network: 'default', networkTags: ['proxy'], requestTimeoutSeconds: 30 },
  },
];

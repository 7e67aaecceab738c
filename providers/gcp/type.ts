import type { ProviderType } from '../registry.js';
import { parseGcpConfig, type GcpSettings } from './config.js';
import { GcpProvider } from './gcp-provider.js';

export const gcpProviderType: ProviderType<GcpSettings> = {
  type: 'gcp',
  parseConfig: parseGcpConfig,
  async create({ name, config, logger }) {
    // Loaded on demand: google-gax is heavy and only GCP-configured operators need it.
    const { GoogleComputeApi } = await import('./google-compute-api.js');
    const api = new GoogleComputeApi(config.requestTimeoutSeconds * 1000);
    const provider = new GcpProvider({ name, settings: config, api, logger });
    return Object.assign(provider, { close: () => api.close() });
  },
};

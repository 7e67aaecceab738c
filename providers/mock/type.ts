import type { ProviderType } from '../registry.js';
import { parseMockConfig, type MockSettings } from './config.js';
import { LoopbackAddresses } from './loopback-addresses.js';
import { MockProvider } from './mock-provider.js';

/**
 * The mock provider type. Its mock providers share one loopback allocator so two configured
 * mock providers never hand out the same address.
 */
export function mockProviderType(loopback = new LoopbackAddresses()): ProviderType<MockSettings> {
  return {
    type: 'mock',
    parseConfig: parseMockConfig,
    create: ({ name, config, logger }) => new MockProvider({ name, settings: config, logger, loopback }),
  };
}

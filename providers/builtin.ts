import { gcpProviderType } from './gcp/type.js';
import { kubernetesProviderType } from './kubernetes/type.js';
import { mockProviderType } from './mock/type.js';
import { ProviderRegistry } from './registry.js';

/** A registry holding the providers shipped with the operator. */
export function builtinProviderRegistry(): ProviderRegistry {
  return new ProviderRegistry()
    .register(mockProviderType())
    .register(gcpProviderType)
    .register(kubernetesProviderType);
}

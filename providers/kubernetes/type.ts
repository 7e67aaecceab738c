import { CoreV1Api } from '@kubernetes/client-node';
import type { ProviderType } from '../registry.js';
import { parseKubernetesConfig, type KubernetesSettings } from './config.js';
import { KubernetesProvider } from './kubernetes-provider.js';

export const kubernetesProviderType: ProviderType<KubernetesSettings> = {
  type: 'kubernetes',
  parseConfig: parseKubernetesConfig,
  create({ name, config, logger, kubeConfig }) {
    if (!kubeConfig)
      throw new Error(`provider ${name} (type kubernetes) needs a KubeConfig in its dependencies`);
    return new KubernetesProvider({
      name,
      settings: config,
      core: kubeConfig.makeApiClient(CoreV1Api),
      logger,
    });
  },
};

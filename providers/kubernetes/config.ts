import type { ConfigObject } from '../config-reader.js';

export interface KubernetesSettings {
  /** Where proxy Pods live; must exist (the operator does not create namespaces). */
  namespace: string;
  /** A Squid image; its default config listens on 3128. */
  image: string;
}

export const KUBERNETES_DEFAULTS = {
  namespace: 'proxy-operator-proxies',
  image: 'ubuntu/squid',
} as const;

const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Reads the `kubernetes:` block: { namespace, image }, both defaulted. */
export function parseKubernetesConfig(block: ConfigObject): KubernetesSettings {
  const namespace = block.string('namespace', KUBERNETES_DEFAULTS.namespace);
  if (!NAMESPACE_PATTERN.test(namespace))
    block.fail('namespace', `"${namespace}" is not a valid namespace name`);
  return { namespace, image: block.string('image', KUBERNETES_DEFAULTS.image) };
}

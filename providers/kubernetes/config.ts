import { isIP } from 'node:net';
import type { ConfigObject } from '../config-reader.js';

export interface KubernetesSettings {
  /** Where proxy Pods live; must exist (the operator does not create namespaces). */
  namespace: string;
  /**
   * A Squid image. The Pod's pull policy is IfNotPresent, so a preloaded image (kind load,
   * a mirror, an air-gapped node) is used as it is; pin a tag so every node runs the same. The provider ships the
   * configuration Squid runs with (squid-config.ts); the image only has to provide
   * `/bin/sh` and `squid` on PATH.
   */
  image: string;
  /**
   * Source ranges Squid accepts clients from (its `acl clients src`). Default: the private
   * ranges a Pod network uses, so in-cluster probes and crawlers are admitted.
   * Optional here (defaulted) so code building settings by hand need not repeat defaults.
   */
  clients?: readonly string[];
  /**
   * A Pod not Ready this long after its creation is reported Terminated, like a cloud
   * instance that never boots, so the operator replaces it; the Provisioned condition says why.
   */
  startTimeoutSeconds?: number;
}

/** RFC 1918, loopback, IPv6 unique-local and link-local: where Pod networks live. */
export const PRIVATE_CLIENT_RANGES = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '127.0.0.0/8',
  'fc00::/7',
  'fe80::/10',
  '::1/128',
] as const;

export const KUBERNETES_DEFAULTS = {
  namespace: 'proxy-operator-proxies',
  image: 'ubuntu/squid:6.6-24.04_beta',
  clients: [...PRIVATE_CLIENT_RANGES],
  startTimeoutSeconds: 300,
} as const;

const NAMESPACE_PATTERN = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Whether `cidr` is an address or an address/prefix Squid's `acl src` understands. */
export function isCidr(cidr: string): boolean {
  const [address, prefix, extra] = cidr.split('/');
  const family = isIP(address ?? '');
  if (!family || extra !== undefined) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

/** Reads the `kubernetes:` block: { namespace, image, clients, startTimeoutSeconds }, all defaulted. */
export function parseKubernetesConfig(block: ConfigObject): KubernetesSettings {
  const namespace = block.string('namespace', KUBERNETES_DEFAULTS.namespace);
  if (!NAMESPACE_PATTERN.test(namespace))
    block.fail('namespace', `"${namespace}" is not a valid namespace name`);
  const image = block.string('image', KUBERNETES_DEFAULTS.image);
  const clients = block.stringList('clients', KUBERNETES_DEFAULTS.clients);
  if (clients.length === 0) block.fail('clients', 'must list at least one source range');
  clients.forEach((c, i) => {
    if (!isCidr(c)) block.fail(`clients[${i}]`, `"${c}" is not an address or CIDR range`);
  });
  const startTimeoutSeconds = block.number('startTimeoutSeconds', KUBERNETES_DEFAULTS.startTimeoutSeconds, {
    integer: true,
    min: 10,
  });
  return { namespace, image, clients, startTimeoutSeconds };
}

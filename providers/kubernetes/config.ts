import { isIP } from 'node:net';
import { INTERNAL_DESTINATIONS } from '../../crds/internal-destinations.js';
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
  /**
   * Destination ranges Squid refuses to every client: by default link-local (the metadata
   * endpoint), loopback, RFC 1918 and IPv6 unique-local (crds/internal-destinations.ts).
   */
  deniedDestinations?: readonly string[];
  /**
   * The cluster's Pod and Service CIDRs, refused too: a cluster whose ranges lie outside the
   * private ones (public or CGNAT addresses) must list them here.
   */
  clusterCIDRs?: readonly string[];
  /**
   * Exceptions inside the refused ranges, by explicit configuration only (a test's probe
   * target on a private address). Empty by default.
   */
  allowedDestinations?: readonly string[];
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
  // By digest: a tag can be moved by whoever controls the repository (docs/deploying.md).
  image:
    'ubuntu/squid:6.6-24.04_beta@sha256:6a097f68bae708cedbabd6188d68c7e2e7a38cedd05a176e1cc0ba29e3bbe029',
  clients: [...PRIVATE_CLIENT_RANGES],
  startTimeoutSeconds: 300,
  deniedDestinations: INTERNAL_DESTINATIONS,
  clusterCIDRs: [] as readonly string[],
  allowedDestinations: [] as readonly string[],
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

/** A list of CIDRs; each bad entry fails naming its index. */
function cidrList(block: ConfigObject, key: string, fallback: readonly string[]): readonly string[] {
  const list = block.stringList(key, fallback);
  list.forEach((c, i) => {
    if (!isCidr(c)) block.fail(`${key}[${i}]`, `"${c}" is not an address or CIDR range`);
  });
  return list;
}

/**
 * Reads the `kubernetes:` block: { namespace, image, clients, startTimeoutSeconds,
 * deniedDestinations, clusterCIDRs, allowedDestinations }, all defaulted.
 */
export function parseKubernetesConfig(block: ConfigObject): KubernetesSettings {
  const namespace = block.string('namespace', KUBERNETES_DEFAULTS.namespace);
  if (!NAMESPACE_PATTERN.test(namespace))
    block.fail('namespace', `"${namespace}" is not a valid namespace name`);
  const image = block.string('image', KUBERNETES_DEFAULTS.image);
  const clients = cidrList(block, 'clients', KUBERNETES_DEFAULTS.clients);
  if (clients.length === 0) block.fail('clients', 'must list at least one source range');
  const deniedDestinations = cidrList(block, 'deniedDestinations', KUBERNETES_DEFAULTS.deniedDestinations);
  const clusterCIDRs = cidrList(block, 'clusterCIDRs', KUBERNETES_DEFAULTS.clusterCIDRs);
  const allowedDestinations = cidrList(block, 'allowedDestinations', KUBERNETES_DEFAULTS.allowedDestinations);
  const startTimeoutSeconds = block.number('startTimeoutSeconds', KUBERNETES_DEFAULTS.startTimeoutSeconds, {
    integer: true,
    min: 10,
  });
  return {
    namespace,
    image,
    clients,
    startTimeoutSeconds,
    deniedDestinations,
    clusterCIDRs,
    allowedDestinations,
  };
}

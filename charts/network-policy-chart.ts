import { Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import { INTERNAL_IPV4_RANGES, INTERNAL_IPV6_RANGES } from '../crds/internal-destinations.js';
import { APP_LABELS, OPERATOR_NAMESPACE } from './names.js';
import { DEFAULT_PROVIDERS, type ProviderConfigEntry } from './providers-config.js';

/**
 * The label a namespace carries when its Pods may use the proxies the `kubernetes` provider
 * runs: `kubectl label namespace <ns> crawl.example.com/proxy-client=true`.
 */
export const PROXY_CLIENT_LABEL = 'crawl.example.com/proxy-client';
export const PROXY_CLIENT_LABEL_VALUE = 'true';
/** Labels on every Squid Pod of the `kubernetes` provider (providers/kubernetes/pod-spec.ts; a test ties them). */
export const SQUID_POD_LABELS = {
  'app.kubernetes.io/name': 'squid',
  'app.kubernetes.io/managed-by': 'proxy-operator',
} as const;
/** The Squid container's port name: a Proxy chooses its port (spec.port), the name stays. */
export const SQUID_PORT_NAME = 'proxy';
export const SQUID_NETWORK_POLICY_NAME = 'squid-ingress';
/** Set by the API server on every namespace (Kubernetes 1.21+), so it cannot be forged by a label edit. */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';
/** The cluster DNS Pods Squid resolves names with (CoreDNS and kube-dns both carry this label). */
const CLUSTER_DNS = { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } } as const;

/** What one namespace of kubernetes-provider Pods needs from the providers config. */
export interface SquidNamespace {
  namespace: string;
  /** Cluster CIDRs refused too (outside the private ranges). */
  clusterCIDRs: readonly string[];
  /** Explicit exceptions (a test's probe target). */
  allowedDestinations: readonly string[];
}

/** Every namespace the providers config puts kubernetes-provider Pods in, with its ranges. */
export function squidNamespaces(entries: readonly ProviderConfigEntry[]): SquidNamespace[] {
  const byNamespace = new Map<string, SquidNamespace>();
  for (const entry of entries) {
    if (entry.type !== 'kubernetes') continue;
    const block = (entry.kubernetes ?? {}) as Partial<Record<keyof SquidNamespace, unknown>>;
    const namespace = typeof block.namespace === 'string' ? block.namespace : 'proxy-operator-proxies';
    const list = (v: unknown) =>
      Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
    const known = byNamespace.get(namespace);
    byNamespace.set(namespace, {
      namespace,
      clusterCIDRs: [...(known?.clusterCIDRs ?? []), ...list(block.clusterCIDRs)],
      allowedDestinations: [...(known?.allowedDestinations ?? []), ...list(block.allowedDestinations)],
    });
  }
  return [...byNamespace.values()];
}

const isV6 = (cidr: string) => cidr.includes(':');
const withPrefix = (cidr: string) => (cidr.includes('/') ? cidr : `${cidr}/${isV6(cidr) ? 128 : 32}`);

/**
 * Egress a proxy may use: anywhere but the internal ranges and the cluster's CIDRs (the same
 * ranges its squid.conf refuses; this is the second lock, enforced by the CNI, should Squid's
 * be misconfigured), plus the cluster DNS, and the explicit exceptions.
 */
export function squidEgress(ns: SquidNamespace): kplus.k8s.NetworkPolicyEgressRule[] {
  const except = (family: 4 | 6) =>
    [
      ...(family === 4 ? INTERNAL_IPV4_RANGES : INTERNAL_IPV6_RANGES),
      ...ns.clusterCIDRs.filter((c) => isV6(c) === (family === 6)),
    ]
      // The API server refuses IPv4-mapped blocks; on the wire such a destination is an IPv4
      // packet, which the IPv4 exceptions already cover (Squid keeps the range: it sees names).
      .filter((cidr) => !cidr.toLowerCase().startsWith('::ffff:'))
      .map(withPrefix);
  return [
    {
      to: [
        { ipBlock: { cidr: '0.0.0.0/0', except: except(4) } },
        { ipBlock: { cidr: '::/0', except: except(6) } },
        ...ns.allowedDestinations.map((cidr) => ({ ipBlock: { cidr: withPrefix(cidr) } })),
      ],
    },
    {
      to: [
        {
          namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: CLUSTER_DNS.namespace } },
          podSelector: { matchLabels: { ...CLUSTER_DNS.labels } },
        },
      ],
      ports: [
        { protocol: 'UDP', port: kplus.k8s.IntOrString.fromNumber(53) },
        { protocol: 'TCP', port: kplus.k8s.IntOrString.fromNumber(53) },
      ],
    },
  ];
}

/**
 * dist/network-policy.yaml: in every namespace the shipped providers config puts Squid Pods
 * in, they accept connections only on their proxy port, and only from the operator (health
 * probes) and from namespaces labelled as proxy clients; and they reach nothing inside the
 * cluster (squidEgress). Without it any Pod could use them as open proxies into the cluster.
 * Applied after the operator chart, which creates the namespace. Needs a CNI that enforces
 * NetworkPolicy (docs/security.md).
 */
export class NetworkPolicyChart extends Chart {
  constructor(scope: Construct, id: string, providers: readonly ProviderConfigEntry[] = DEFAULT_PROVIDERS) {
    super(scope, id, { labels: APP_LABELS });
    for (const ns of squidNamespaces(providers)) {
      new kplus.k8s.KubeNetworkPolicy(this, `squid-${ns.namespace}`, {
        metadata: { name: SQUID_NETWORK_POLICY_NAME, namespace: ns.namespace },
        spec: {
          podSelector: { matchLabels: { ...SQUID_POD_LABELS } },
          policyTypes: ['Ingress', 'Egress'],
          ingress: [
            {
              from: [
                {
                  namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: OPERATOR_NAMESPACE } },
                  podSelector: { matchLabels: { ...APP_LABELS } },
                },
                { namespaceSelector: { matchLabels: { [PROXY_CLIENT_LABEL]: PROXY_CLIENT_LABEL_VALUE } } },
              ],
              ports: [{ protocol: 'TCP', port: kplus.k8s.IntOrString.fromString(SQUID_PORT_NAME) }],
            },
          ],
          egress: squidEgress(ns),
        },
      });
    }
  }
}

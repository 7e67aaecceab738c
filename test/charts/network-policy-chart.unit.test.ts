// Issue 12 item 8: the kubernetes provider's Squid Pods take connections only from the
// operator and from namespaces labelled as proxy clients.
import type { V1Deployment } from '@kubernetes/client-node';
import {
  PROXY_CLIENT_LABEL,
  SQUID_NETWORK_POLICY_NAME,
  SQUID_PORT_NAME,
  squidEgress,
  squidNamespaces,
} from '../../charts/network-policy-chart.js';
import { INTERNAL_IPV4_RANGES, INTERNAL_IPV6_RANGES } from '../../crds/internal-destinations.js';
import { OPERATOR_NAME, OPERATOR_NAMESPACE, PROXIES_NAMESPACE } from '../../charts/names.js';
import { KUBERNETES_DEFAULTS } from '../../providers/kubernetes/config.js';
import { buildPod } from '../../providers/kubernetes/pod-spec.js';
import { chartObjects, find } from './manifests.js';

const charts = chartObjects();
const policy = find(
  charts.get('network-policy')!,
  'NetworkPolicy',
  SQUID_NETWORK_POLICY_NAME,
  PROXIES_NAMESPACE,
) as unknown as NetworkPolicy;
const spec = policy.spec;
const deployment = find(
  charts.get('operator')!,
  'Deployment',
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
) as unknown as V1Deployment;

interface Selector {
  matchLabels?: Record<string, string>;
  matchExpressions?: unknown[];
}
/** The manifest as JSON (client-node's model renames `from`). */
interface NetworkPolicy {
  metadata: { namespace?: string };
  spec: {
    podSelector: Selector;
    policyTypes?: string[];
    egress?: unknown[];
    ingress?: Array<{
      from?: Array<{ namespaceSelector?: Selector; podSelector?: Selector }>;
      ports?: Array<{ protocol?: string; port?: string | number }>;
    }>;
  };
}

/** A label selector's matchLabels hold for these labels (the policy uses matchLabels only). */
function selects(selector: Selector | undefined, labels: Record<string, string>): boolean {
  expect(selector?.matchExpressions).toBeUndefined();
  return Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
}

// A Squid Pod exactly as the kubernetes provider builds it, on a non-default port.
const squid = buildPod(
  {
    uid: '0b5c5a3e-1111-4222-8333-944455556666',
    revision: '0123abcd',
    proxy: 'crawl/p1',
    namespace: 'crawl',
    owner: 'proxy-operator',
    port: 8080,
    placement: {},
  },
  { namespace: KUBERNETES_DEFAULTS.namespace, image: KUBERNETES_DEFAULTS.image },
);

/** The API server refuses IPv4-mapped blocks (Squid keeps the range; the IPv4 ones cover its packets). */
const IPV6_EXCEPT = INTERNAL_IPV6_RANGES.filter((cidr) => !cidr.startsWith('::ffff:'));

describe('the Squid NetworkPolicy', () => {
  it('lives where the kubernetes provider puts its Pods by default', () => {
    expect(policy.metadata.namespace).toBe(KUBERNETES_DEFAULTS.namespace);
  });

  it("selects the provider's Squid Pods, and nothing of the operator's", () => {
    expect(Object.keys(spec.podSelector.matchLabels ?? {}).length).toBeGreaterThan(0);
    expect(selects(spec.podSelector, squid.metadata!.labels!)).toBe(true);
    expect(selects(spec.podSelector, deployment.spec!.template.metadata!.labels!)).toBe(false);
  });

  it('restricts egress to everything but the inside: internal ranges refused, the cluster DNS allowed', () => {
    expect(spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(spec.egress).toEqual([
      {
        to: [
          { ipBlock: { cidr: '0.0.0.0/0', except: [...INTERNAL_IPV4_RANGES] } },
          { ipBlock: { cidr: '::/0', except: IPV6_EXCEPT } },
        ],
      },
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
            podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
          },
        ],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
    ]);
    expect(INTERNAL_IPV4_RANGES).toEqual(
      expect.arrayContaining(['169.254.0.0/16', '127.0.0.0/8', '10.0.0.0/8']),
    );
  });

  it('applies in whichever namespace the providers config puts the proxies, with its cluster CIDRs and exceptions', () => {
    const namespaces = squidNamespaces([
      {
        name: 'a',
        type: 'kubernetes',
        kubernetes: { namespace: 'crawl-proxies', clusterCIDRs: ['100.96.0.0/11'] },
      },
      {
        name: 'b',
        type: 'kubernetes',
        kubernetes: { namespace: 'crawl-proxies', allowedDestinations: ['10.1.2.3'] },
      },
      { name: 'm', type: 'mock' },
    ]);
    expect(namespaces).toEqual([
      { namespace: 'crawl-proxies', clusterCIDRs: ['100.96.0.0/11'], allowedDestinations: ['10.1.2.3'] },
    ]);
    const [open, dns] = squidEgress(namespaces[0]);
    expect(open.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: [...INTERNAL_IPV4_RANGES, '100.96.0.0/11'] } },
      { ipBlock: { cidr: '::/0', except: IPV6_EXCEPT } },
      { ipBlock: { cidr: '10.1.2.3/32' } },
    ]);
    expect(dns.ports).toHaveLength(2);
  });

  it("opens only the Squid container's named port, whatever spec.port a Proxy chose", () => {
    expect(spec.ingress).toHaveLength(1);
    expect(spec.ingress![0].ports).toEqual([{ protocol: 'TCP', port: SQUID_PORT_NAME }]);
    expect(squid.spec!.containers[0].ports).toEqual([
      expect.objectContaining({ name: SQUID_PORT_NAME, containerPort: 8080, protocol: 'TCP' }),
    ]);
  });

  it('admits the operator Pods in the operator namespace, and clients by namespace label', () => {
    const from = spec.ingress![0].from!;
    expect(from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': OPERATOR_NAMESPACE } },
        podSelector: { matchLabels: deployment.spec!.template.metadata!.labels },
      },
      { namespaceSelector: { matchLabels: { [PROXY_CLIENT_LABEL]: 'true' } } },
    ]);
    // Both selectors of the operator's peer sit in one entry: the operator Pods AND its namespace.
    expect(selects(from[0].podSelector, deployment.spec!.template.metadata!.labels!)).toBe(true);
    // An unlabelled namespace matches no peer; a labelled one matches the second.
    expect(selects(from[1].namespaceSelector, { 'kubernetes.io/metadata.name': 'crawl' })).toBe(false);
    expect(
      selects(from[1].namespaceSelector, {
        'kubernetes.io/metadata.name': 'crawl',
        [PROXY_CLIENT_LABEL]: 'true',
      }),
    ).toBe(true);
  });
});

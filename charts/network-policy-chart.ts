import { Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import { APP_LABELS, OPERATOR_NAMESPACE, PROXIES_NAMESPACE } from './names.js';

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

/**
 * dist/network-policy.yaml: the Squid Pods of the `kubernetes` provider accept connections
 * only on their proxy port, and only from the operator (health probes) and from namespaces
 * labelled as proxy clients. Without it any Pod in the cluster could use them as open proxies.
 * Applied after the operator chart, which creates the namespace.
 */
export class NetworkPolicyChart extends Chart {
  constructor(scope: Construct, id: string) {
    super(scope, id, { labels: APP_LABELS });
    new kplus.k8s.KubeNetworkPolicy(this, 'squid-ingress', {
      metadata: { name: SQUID_NETWORK_POLICY_NAME, namespace: PROXIES_NAMESPACE },
      spec: {
        podSelector: { matchLabels: { ...SQUID_POD_LABELS } },
        // Ingress only: a proxy's job is to reach anywhere on the internet.
        policyTypes: ['Ingress'],
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
      },
    });
  }
}

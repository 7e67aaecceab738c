import * as kplus from 'cdk8s-plus-28';
import { Construct } from 'constructs';
import {
  DISCOVERY_PORT,
  GATEWAY_LABELS,
  GATEWAY_NAME,
  GATEWAY_PORT,
  METRICS_PORT,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
} from './names.js';
import { describeSelectors, namespacePeers, type NamespaceLabels } from './ingress-sources.js';
import type { DeploymentSpec, OperatorPort } from './operator-deployment.js';

/** A policy rule's ports: the container's named port, so the number may change. */
export const namedPort = (p: OperatorPort) => [
  { protocol: 'TCP', port: kplus.k8s.IntOrString.fromString(p.name) },
];

/**
 * The label a namespace carries when its Pods may use the gateway:
 * `kubectl label namespace <ns> crawl.example.com/gateway-client=true`. Apart from the Squid
 * Pods' proxy-client label: a gateway client need not reach the proxies directly, around the book.
 */
export const GATEWAY_CLIENT_LABEL = 'crawl.example.com/gateway-client';
export const GATEWAY_CLIENT_LABEL_VALUE = 'true';
/** Replicas of the gateway Deployment with the Redis store; the PDB keeps one of them up. */
export const GATEWAY_REPLICAS = 2;
/**
 * The gateway's --gateway-drain-timeout, passed explicitly so the grace period below is
 * computed from what the Pod runs: open tunnels finish within it after SIGTERM, then are cut.
 */
export const GATEWAY_DRAIN_SECONDS = 20;
export const GATEWAY_PORTS = {
  metrics: { name: 'metrics', number: METRICS_PORT },
  discovery: { name: 'discovery', number: DISCOVERY_PORT },
  gateway: { name: 'gateway', number: GATEWAY_PORT },
} as const satisfies Record<string, OperatorPort>;

/** Why the gateway's Service pins a client to one Pod; shipped as an annotation. */
export const GATEWAY_AFFINITY_REASON =
  'sessionAffinity ClientIP: a report by session (POST /v1/sessions/{key}/report on the gateway port) ' +
  "must reach the replica that holds the session's lease, and keep-alive idle leases stay on one replica.";

/** The NetworkPolicy's rule, shipped as an annotation on it. */
export function gatewayPolicyRule(clients: readonly NamespaceLabels[]): string {
  return (
    `The gateway port admits only Pods of namespaces matching ${describeSelectors(clients)}; ` +
    `the metrics (and, in the operator's one Pod, discovery) port is the NetworkPolicy ${OPERATOR_NAME}'s; ` +
    "the kubelet's probes come from the node, which NetworkPolicy always admits. Needs a CNI that enforces NetworkPolicy."
  );
}

/** What the gateway needs from the chart that holds it (the operator chart's account and Deployment makers). */
export interface GatewayObjectsProps {
  /**
   * memory: the gateway runs inside the operator's one Pod (it must share the in-memory book
   * with the discovery API and the health engine), selected by `podLabels`; the chart makes
   * its Service and NetworkPolicy only. redis: a Deployment of its own, made with `deploy`.
   */
  topology: 'memory' | 'redis';
  /** memory: the operator Pod's labels. */
  podLabels?: Readonly<Record<string, string>>;
  /** redis: makes the gateway's ServiceAccount bound to the gateway's rows of the permission table. */
  account?: () => kplus.ServiceAccount;
  /** redis: makes a Deployment of the operator image (operatorDeployment with the chart's providers and image). */
  deploy?: (spec: Omit<DeploymentSpec, 'image' | 'providers'>) => kplus.Deployment;
  /** redis: the Deployment's store flags (--watch-namespace, --lease-store=redis, --redis-url, ...). */
  storeArgs?: readonly string[];
  /** redis: the Pods' preStop pause (the discovery Pods' too). */
  preStopSeconds?: number;
  /** redis: the readiness rule annotation the discovery Pods carry too. */
  readinessRule?: string;
  /** The namespaces whose Pods may reach the gateway port (ingress-sources.ts). */
  clients: readonly NamespaceLabels[];
}

/**
 * The gateway's objects in the operator's namespace: its Service and NetworkPolicy in both
 * topologies, and with the Redis store its own scalable Deployment (own ServiceAccount with
 * no Kubernetes writes, `--components=gateway`) and PodDisruptionBudget.
 */
export class GatewayObjects extends Construct {
  constructor(scope: Construct, id: string, props: GatewayObjectsProps) {
    super(scope, id);
    const metadata = { name: GATEWAY_NAME, namespace: OPERATOR_NAMESPACE };
    let podLabels: Readonly<Record<string, string>>;
    if (props.topology === 'memory') {
      if (props.podLabels === undefined) throw new Error('GatewayObjects: memory needs podLabels');
      podLabels = props.podLabels;
    } else {
      const { account, deploy, storeArgs } = props;
      if (account === undefined || deploy === undefined || storeArgs === undefined)
        throw new Error('GatewayObjects: redis needs account, deploy and storeArgs');
      podLabels = GATEWAY_LABELS;
      deploy({
        id: 'gateway-deployment',
        name: GATEWAY_NAME,
        serviceAccount: account(),
        labels: GATEWAY_LABELS,
        replicas: GATEWAY_REPLICAS,
        args: ['--components=gateway', `--gateway-drain-timeout=${GATEWAY_DRAIN_SECONDS}`, ...storeArgs],
        annotations:
          props.readinessRule === undefined
            ? {}
            : { 'proxy-operator.crawl.example.com/store-readiness': props.readinessRule },
        strategy: kplus.DeploymentStrategy.rollingUpdate({
          maxSurge: kplus.PercentOrAbsolute.absolute(1),
          maxUnavailable: kplus.PercentOrAbsolute.absolute(0),
        }),
        ports: [GATEWAY_PORTS.metrics, GATEWAY_PORTS.gateway],
        redis: true,
        ...(props.preStopSeconds === undefined ? {} : { preStopSeconds: props.preStopSeconds }),
      });
      new kplus.k8s.KubePodDisruptionBudget(this, 'pdb', {
        metadata,
        spec: {
          minAvailable: kplus.k8s.IntOrString.fromNumber(1),
          selector: { matchLabels: { ...GATEWAY_LABELS } },
        },
      });
    }

    new kplus.k8s.KubeService(this, 'service', {
      metadata: {
        ...metadata,
        annotations: { 'proxy-operator.crawl.example.com/session-affinity': GATEWAY_AFFINITY_REASON },
      },
      spec: {
        selector: { ...podLabels },
        ports: [
          {
            name: GATEWAY_PORTS.gateway.name,
            port: GATEWAY_PORT,
            targetPort: kplus.k8s.IntOrString.fromString(GATEWAY_PORTS.gateway.name),
          },
        ],
        sessionAffinity: 'ClientIP',
      },
    });

    new kplus.k8s.KubeNetworkPolicy(this, 'network-policy', {
      metadata: {
        ...metadata,
        annotations: { 'proxy-operator.crawl.example.com/rule': gatewayPolicyRule(props.clients) },
      },
      spec: {
        podSelector: { matchLabels: { ...podLabels } },
        // Ingress only: the gateway dials upstream proxies wherever they are, Redis and the API server.
        policyTypes: ['Ingress'],
        // The metrics and discovery ports: the operator chart's policy over every component's Pods.
        ingress: [
          { from: namespacePeers('gateway clients', props.clients), ports: namedPort(GATEWAY_PORTS.gateway) },
        ],
      },
    });
  }
}

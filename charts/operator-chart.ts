import { Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import {
  APP_LABELS,
  DEFAULT_IMAGE,
  DISCOVERY_PORT,
  DISCOVERY_SERVICE_NAME,
  METRICS_COMPONENT_LABELS,
  METRICS_PORT,
  METRICS_SERVICE_NAME,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
  PROVIDERS_CONFIG_KEY,
  PROVIDERS_CONFIGMAP_NAME,
  SERVICE_ACCOUNT_NAME,
  GATEWAY_SERVICE_ACCOUNT_NAME,
  CONTROLLER_LABELS,
  DISCOVERY_DEPLOYMENT_NAME,
  DISCOVERY_LABELS,
  DISCOVERY_SERVICE_ACCOUNT_NAME,
  DEFAULT_WATCH_NAMESPACE,
  POD_SECURITY_LABELS,
} from './names.js';
import { GATEWAY_PORTS, GatewayObjects, namedPort } from './gateway-chart.js';
import {
  DEFAULT_INGRESS_SOURCES,
  describeSelectors,
  namespacePeers,
  type IngressSources,
} from './ingress-sources.js';
import { squidNamespaces } from './network-policy-chart.js';
import { operatorDeployment, type DeploymentSpec } from './operator-deployment.js';
import type { Component } from './operator-permissions.js';
import { OperatorRbac } from './operator-rbac.js';
import { DEFAULT_PROVIDERS, providersYaml, type ProviderConfigEntry } from './providers-config.js';

/**
 * Where the lease book lives. memory: one Deployment running every component, one replica,
 * replaced with Recreate (two books never serve at once). redis: the controller and the
 * discovery API as two Deployments, the discovery API with DISCOVERY_REPLICAS replicas, all
 * sharing one book in the Redis at `url` (password from the REDIS_SECRET_NAME Secret).
 */
export type LeaseStoreChoice = { kind: 'memory' } | { kind: 'redis'; url: string; keyPrefix?: string };

export interface OperatorChartProps {
  /** The operator image built by the repository's Dockerfile. */
  image?: string;
  providers?: readonly ProviderConfigEntry[];
  leaseStore?: LeaseStoreChoice;
  /**
   * --watch-namespace of every Pod, and the one namespace whose Proxies, Secrets and Events
   * the operator may touch (its Roles are generated from it): DEFAULT_WATCH_NAMESPACE unless
   * given (`npm run synth` takes it from $WATCH_NAMESPACE). Must exist before the chart is applied.
   */
  watchNamespace?: string;
  /** Who may reach the metrics, discovery and gateway ports (DEFAULT_INGRESS_SOURCES unless given). */
  ingress?: IngressSources;
}

/** The operator policy's rule, shipped as an annotation on it. */
function ingressRule(ingress: IngressSources): string {
  return (
    `The metrics port admits only Pods of namespaces matching ${describeSelectors(ingress.monitoring)}; ` +
    `the discovery port only those matching ${describeSelectors(ingress.discoveryClients)}; ` +
    "the kubelet's probes come from the node, which NetworkPolicy always admits. Needs a CNI that enforces NetworkPolicy."
  );
}

/** Why the memory-store Deployment runs one replica; shipped as an annotation so it travels with the object. */
export const REPLICAS_REASON =
  'Leases and cooldowns of the discovery API are kept in memory per replica, so clients of two ' +
  'replicas would see two lease books. Rollouts use Recreate: the old Pod is gone before the new ' +
  "one serves, so two books never serve at once (the API is down for the new Pod's start-up). " +
  'For more replicas and rollouts without a gap, use the Redis lease store (dist/operator-redis.yaml).';

/** Replicas of the discovery Deployment with the Redis store; the PDB keeps one of them up. */
export const DISCOVERY_REPLICAS = 2;
/**
 * The discovery Pods' preStop pause: the Pod leaves the Service's endpoints as soon as it is
 * told to stop, but kube-proxies and load balancers learn it a few seconds later; serving
 * meanwhile (SIGTERM comes after the pause) means no client meets a closed port.
 */
export const PRE_STOP_SECONDS = 5;
/**
 * The readiness rule with the Redis store, shipped as an annotation: a discovery replica
 * stays Ready while Redis is unreachable, and answers 503 store_unavailable with Retry-After.
 */
export const STORE_READINESS_RULE =
  'Readiness does not follow Redis: every replica shares the one Redis, so taking them out of ' +
  'the Service when it is unreachable would turn a clear, retryable 503 store_unavailable ' +
  '(Retry-After: 1) into connection errors, and bring nothing back sooner. /readyz reports the ' +
  'process and its cache; proxy_operator_lease_store_up and the logs report the store.';

export {
  OPERATOR_MEMORY,
  OPERATOR_RUNTIME_ENV,
  PLUGINS_USAGE,
  TERMINATION_GRACE_SECONDS,
} from './operator-deployment.js';

/**
 * The operator itself (dist/operator.yaml): its namespaces, ServiceAccount, RBAC, providers
 * ConfigMap, Deployment and the discovery and metrics Services.
 */
export class OperatorChart extends Chart {
  constructor(scope: Construct, id: string, props: OperatorChartProps = {}) {
    super(scope, id, { labels: APP_LABELS });
    const providerEntries = props.providers ?? DEFAULT_PROVIDERS;
    const proxiesNamespaces = squidNamespaces(providerEntries).map((n) => n.namespace);
    const watchNamespace = props.watchNamespace ?? DEFAULT_WATCH_NAMESPACE;
    const ingress = props.ingress ?? DEFAULT_INGRESS_SOURCES;
    // Namespaces first: `kubectl apply -f` creates objects in file order. Both run only Pods
    // that meet the Pod Security "restricted" profile, and the API server enforces it.
    for (const name of [...new Set([OPERATOR_NAMESPACE, ...proxiesNamespaces])]) {
      new kplus.Namespace(this, `namespace-${name}`, {
        metadata: { name, labels: { ...POD_SECURITY_LABELS } },
      });
    }

    const metadata = (name: string) => ({ name, namespace: OPERATOR_NAMESPACE });
    // One ServiceAccount per Deployment, each bound to its components' rows of the table only.
    const account = (id: string, name: string, components: readonly Component[]) => {
      const sa = new kplus.ServiceAccount(this, id, {
        metadata: metadata(name),
        // The operator talks to the API with this token.
        automountToken: true,
      });
      new OperatorRbac(this, `${id}-rbac`, {
        serviceAccount: sa,
        name,
        components,
        watchNamespace,
        proxiesNamespaces,
      });
      return sa;
    };

    const providers = new kplus.ConfigMap(this, 'providers', {
      metadata: metadata(PROVIDERS_CONFIGMAP_NAME),
      data: { [PROVIDERS_CONFIG_KEY]: providersYaml(providerEntries) },
    });

    const image = props.image ?? DEFAULT_IMAGE;
    const store = props.leaseStore ?? { kind: 'memory' };
    const watchArgs = [`--watch-namespace=${watchNamespace}`];
    const service = (
      name: string,
      port: number,
      portName: string,
      selector: Record<string, string>,
      labels: Record<string, string> = {},
    ) => {
      const svc = new kplus.Service(this, name, {
        metadata: { ...metadata(name), labels },
        ports: [{ name: portName, port, targetPort: port }],
      });
      for (const [key, value] of Object.entries(selector)) svc.selectLabel(key, value);
    };
    if (store.kind === 'memory') {
      const serviceAccount = account('service-account', SERVICE_ACCOUNT_NAME, [
        'controller',
        'discovery',
        'gateway',
      ]);
      this.deployment({
        id: 'deployment',
        name: OPERATOR_NAME,
        image,
        serviceAccount,
        providers,
        labels: APP_LABELS,
        replicas: 1,
        // The gateway shares this Pod's in-memory book: a Pod of its own would keep another.
        args: ['--components=controller,discovery,gateway', ...watchArgs],
        ports: [GATEWAY_PORTS.metrics, GATEWAY_PORTS.discovery, GATEWAY_PORTS.gateway],
        annotations: { 'proxy-operator.crawl.example.com/replicas-reason': REPLICAS_REASON },
        // Never two Pods (two lease books) at once: the old one stops before the new one starts.
        strategy: kplus.DeploymentStrategy.recreate(),
      });
      service(DISCOVERY_SERVICE_NAME, DISCOVERY_PORT, 'discovery', APP_LABELS);
      new GatewayObjects(this, 'gateway', {
        topology: 'memory',
        podLabels: APP_LABELS,
        clients: ingress.gatewayClients,
      });
    } else {
      const storeArgs = [
        ...watchArgs,
        '--lease-store=redis',
        `--redis-url=${store.url}`,
        ...(store.keyPrefix === undefined ? [] : [`--redis-key-prefix=${store.keyPrefix}`]),
      ];
      this.deployment({
        id: 'deployment',
        name: OPERATOR_NAME,
        image,
        serviceAccount: account('service-account', SERVICE_ACCOUNT_NAME, ['controller']),
        providers,
        labels: CONTROLLER_LABELS,
        replicas: 1,
        args: ['--components=controller', ...storeArgs],
        ports: [GATEWAY_PORTS.metrics],
        annotations: {},
        // Leader election keeps the surge Pod from reconciling until the old one lets go.
        strategy: kplus.DeploymentStrategy.rollingUpdate({
          maxSurge: kplus.PercentOrAbsolute.absolute(1),
          maxUnavailable: kplus.PercentOrAbsolute.absolute(0),
        }),
        redis: true,
      });
      const discovery = this.deployment({
        id: 'discovery-deployment',
        name: DISCOVERY_DEPLOYMENT_NAME,
        image,
        serviceAccount: account('discovery-service-account', DISCOVERY_SERVICE_ACCOUNT_NAME, ['discovery']),
        providers,
        labels: DISCOVERY_LABELS,
        replicas: DISCOVERY_REPLICAS,
        args: ['--components=discovery', ...storeArgs],
        ports: [GATEWAY_PORTS.metrics, GATEWAY_PORTS.discovery],
        annotations: { 'proxy-operator.crawl.example.com/store-readiness': STORE_READINESS_RULE },
        strategy: kplus.DeploymentStrategy.rollingUpdate({
          maxSurge: kplus.PercentOrAbsolute.absolute(1),
          maxUnavailable: kplus.PercentOrAbsolute.absolute(0),
        }),
        redis: true,
        preStopSeconds: PRE_STOP_SECONDS,
      });
      new kplus.k8s.KubePodDisruptionBudget(this, 'discovery-pdb', {
        metadata: metadata(DISCOVERY_DEPLOYMENT_NAME),
        spec: {
          minAvailable: kplus.k8s.IntOrString.fromNumber(1),
          selector: { matchLabels: { ...DISCOVERY_LABELS } },
        },
      });
      void discovery;
      service(DISCOVERY_SERVICE_NAME, DISCOVERY_PORT, 'discovery', DISCOVERY_LABELS);
      new GatewayObjects(this, 'gateway', {
        topology: 'redis',
        account: () => account('gateway-service-account', GATEWAY_SERVICE_ACCOUNT_NAME, ['gateway']),
        deploy: (spec) => this.deployment({ ...spec, image, providers }),
        storeArgs,
        preStopSeconds: PRE_STOP_SECONDS,
        readinessRule: STORE_READINESS_RULE,
        clients: ingress.gatewayClients,
      });
    }
    // Every Pod of every component: its metrics (series naming teams and pools) only to the
    // monitoring namespaces, its discovery API only to the crawlers'. A rule on a port a Pod
    // does not have admits nothing there; the gateway port is the gateway's policy's.
    new kplus.k8s.KubeNetworkPolicy(this, 'ingress-policy', {
      metadata: {
        ...metadata(OPERATOR_NAME),
        annotations: { 'proxy-operator.crawl.example.com/rule': ingressRule(ingress) },
      },
      spec: {
        podSelector: { matchLabels: { ...APP_LABELS } },
        policyTypes: ['Ingress'],
        ingress: [
          { from: namespacePeers('monitoring', ingress.monitoring), ports: namedPort(GATEWAY_PORTS.metrics) },
          {
            from: namespacePeers('discovery clients', ingress.discoveryClients),
            ports: namedPort(GATEWAY_PORTS.discovery),
          },
        ],
      },
    });
    // Every Pod of every component (APP_LABELS): the ServiceMonitor scrapes each through it.
    service(METRICS_SERVICE_NAME, METRICS_PORT, 'metrics', APP_LABELS, { ...METRICS_COMPONENT_LABELS });
  }

  private deployment(spec: DeploymentSpec): kplus.Deployment {
    return operatorDeployment(this, spec);
  }
}

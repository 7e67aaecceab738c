import { ApiObject, Chart, Duration, JsonPatch, Size } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import {
  APP_LABELS,
  DEFAULT_IMAGE,
  DISCOVERY_PORT,
  DISCOVERY_SERVICE_NAME,
  DISCOVERY_TOKENS_DIR,
  DISCOVERY_TOKENS_SECRET_KEY,
  DISCOVERY_TOKENS_SECRET_NAME,
  METRICS_COMPONENT_LABELS,
  METRICS_PORT,
  METRICS_SERVICE_NAME,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
  PLUGINS_DIR,
  PROVIDERS_CONFIG_DIR,
  PROVIDERS_CONFIG_KEY,
  PROVIDERS_CONFIGMAP_NAME,
  READINESS_PERIOD_SECONDS,
  SERVICE_ACCOUNT_NAME,
  CONTROLLER_LABELS,
  DISCOVERY_DEPLOYMENT_NAME,
  DISCOVERY_LABELS,
  DISCOVERY_SERVICE_ACCOUNT_NAME,
  DEFAULT_WATCH_NAMESPACE,
  POD_SECURITY_LABELS,
  REDIS_SECRET_NAME,
  REDIS_SECRET_PASSWORD_KEY,
} from './names.js';
import { squidNamespaces } from './network-policy-chart.js';
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

/**
 * The Pod's terminationGracePeriodSeconds. A graceful stop takes at most: the handlers' drain
 * (30 s; the discovery API's close, ≤ 10 s, and every daemon stop run alongside it) + 5 s for
 * what is still running once aborted + 10 s of cleanup hooks (providers closed) + 5 s for the
 * informers + 5 s for the Lease release = 55 s (the framework's shutdownBudgetSeconds()).
 * 60 s leaves the kubelet no reason to SIGKILL before the Lease is released;
 * test/cmd/shutdown-budget.unit.test.ts ties the two together.
 */
export const TERMINATION_GRACE_SECONDS = 60;

/** How a provider plugin gets into the Pod without rebuilding the image; shipped as an annotation. */
export const PLUGINS_USAGE =
  `Provider plugins: add an init container that copies the plugin's folder from its own image ` +
  `into the "plugins" volume (mounted at ${PLUGINS_DIR}), and list ${PLUGINS_DIR}/<folder> under ` +
  `plugins: in ${PROVIDERS_CONFIG_KEY}. npm-packaged plugins can instead be installed into a ` +
  `derived image (FROM this image; RUN npm install <package>). See the README, "Provider plugins".`;

/**
 * The operator container's memory, sized from `npm run bench:memory` (docs/benchmarks.md,
 * "Operator memory"). The V8 flags are what keeps RSS near the live data: left alone, V8
 * grows the young generation to 128 MiB under the probes' allocation rate and lets the old
 * generation run far ahead of its live size.
 */
export const OPERATOR_MEMORY = {
  /** Measured at 1,000 External proxies probed every 10 s: steady RSS (max) and peak RSS. */
  measuredSteadyMiB: 181,
  measuredPeakMiB: 181,
  /** Measured RSS outside the V8 heap at 1,000 proxies: the node binary, TLS, malloc. */
  measuredOutsideHeapMiB: 110,
  /** The steady state with a margin: what the scheduler reserves. */
  requestMiB: 256,
  /** 2x the peak: room for a larger fleet (~58 KiB per proxy) or a burst before an OOM kill. */
  limitMiB: 384,
  /** V8's old generation cap: V8 collects harder as it nears it, well before the limit. */
  oldSpaceMiB: 160,
  /** V8's young generation is two semi-spaces of this size (V8's own default grows to 64). */
  semiSpaceMiB: 4,
} as const;

/** The Node and libc settings the operator's container runs with (bench/memory.ts measures with them). */
export const OPERATOR_RUNTIME_ENV: Readonly<Record<string, string>> = {
  NODE_OPTIONS: `--max-old-space-size=${OPERATOR_MEMORY.oldSpaceMiB} --max-semi-space-size=${OPERATOR_MEMORY.semiSpaceMiB}`,
  // glibc gives every thread that mallocs its own arena (up to 8 per core), each keeping
  // freed memory; Node's few threads need no more than two.
  MALLOC_ARENA_MAX: '2',
};

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
      const serviceAccount = account('service-account', SERVICE_ACCOUNT_NAME, ['controller', 'discovery']);
      this.deployment({
        id: 'deployment',
        name: OPERATOR_NAME,
        image,
        serviceAccount,
        providers,
        labels: APP_LABELS,
        replicas: 1,
        // The gateway has no Service, PodDisruptionBudget or NetworkPolicy in these manifests
        // yet (issue 46 item 4): the shipped Pod opens no port nobody guards.
        args: ['--components=controller,discovery', ...watchArgs],
        annotations: { 'proxy-operator.crawl.example.com/replicas-reason': REPLICAS_REASON },
        // Never two Pods (two lease books) at once: the old one stops before the new one starts.
        strategy: kplus.DeploymentStrategy.recreate(),
      });
      service(DISCOVERY_SERVICE_NAME, DISCOVERY_PORT, 'discovery', APP_LABELS);
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
    }
    service(METRICS_SERVICE_NAME, METRICS_PORT, 'metrics', APP_LABELS, { ...METRICS_COMPONENT_LABELS });
  }

  private deployment(spec: DeploymentSpec): kplus.Deployment {
    const { image, serviceAccount, providers } = spec;
    const deployment = new kplus.Deployment(this, spec.id, {
      metadata: {
        name: spec.name,
        namespace: OPERATOR_NAMESPACE,
        annotations: {
          ...spec.annotations,
          'proxy-operator.crawl.example.com/plugins': PLUGINS_USAGE,
        },
      },
      replicas: spec.replicas,
      strategy: spec.strategy,
      // Select by the app labels rather than a generated hash label, so Services are readable.
      select: false,
      podMetadata: { labels: spec.labels },
      serviceAccount,
      automountServiceAccountToken: true,
      securityContext: { ensureNonRoot: true, user: 1000, group: 1000 },
      terminationGracePeriod: Duration.seconds(TERMINATION_GRACE_SECONDS + (spec.preStopSeconds ?? 0)),
    });
    deployment.select(kplus.LabelSelector.of({ labels: spec.labels }));

    const tmp = kplus.Volume.fromEmptyDir(this, `${spec.id}-tmp`, 'tmp');
    const plugins = kplus.Volume.fromEmptyDir(this, `${spec.id}-plugins`, 'plugins');
    const config = kplus.Volume.fromConfigMap(this, `${spec.id}-providers-config`, providers, {
      name: 'providers',
    });
    // The API is closed by default: a Pod that serves it mounts the tokens Secret, not
    // optionally, so without the Secret it does not start (kubectl describe names the Secret).
    const servesAPI = !spec.args.includes('--components=controller');
    const tokens = servesAPI
      ? kplus.Volume.fromSecret(
          this,
          `${spec.id}-discovery-tokens`,
          kplus.Secret.fromSecretName(
            this,
            `${spec.id}-discovery-tokens-secret`,
            DISCOVERY_TOKENS_SECRET_NAME,
          ),
          { name: 'discovery-tokens' },
        )
      : undefined;
    const redisSecret = kplus.Secret.fromSecretName(this, `${spec.id}-redis`, REDIS_SECRET_NAME);
    const probe = (path: string) => kplus.Probe.fromHttpGet(path, { port: METRICS_PORT });

    deployment.addContainer({
      name: 'operator',
      image,
      // `kind load docker-image` puts the image on the node; Always would try a registry first.
      imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
      args: [`--providers-config=${PROVIDERS_CONFIG_DIR}/${PROVIDERS_CONFIG_KEY}`, ...spec.args],
      ports: [
        { name: 'metrics', number: METRICS_PORT },
        { name: 'discovery', number: DISCOVERY_PORT },
      ],
      envVariables: {
        // Leader election: the Lease lives in the Pod's namespace and names the Pod as holder.
        POD_NAMESPACE: kplus.EnvValue.fromFieldRef(kplus.EnvFieldPaths.POD_NAMESPACE),
        POD_NAME: kplus.EnvValue.fromFieldRef(kplus.EnvFieldPaths.POD_NAME),
        // Re-read on change: the kubelet updates a mounted Secret in place (not a subPath mount).
        ...(servesAPI
          ? {
              DISCOVERY_TOKENS_FILE: kplus.EnvValue.fromValue(
                `${DISCOVERY_TOKENS_DIR}/${DISCOVERY_TOKENS_SECRET_KEY}`,
              ),
            }
          : {}),
        // From a Secret, never a flag or a ConfigMap; required: the Pod waits for the Secret.
        ...(spec.redis === true
          ? {
              REDIS_PASSWORD: kplus.EnvValue.fromSecretValue(
                { secret: redisSecret, key: REDIS_SECRET_PASSWORD_KEY },
                { optional: false },
              ),
            }
          : {}),
        ...Object.fromEntries(
          Object.entries(OPERATOR_RUNTIME_ENV).map(([name, value]) => [
            name,
            kplus.EnvValue.fromValue(value),
          ]),
        ),
      },
      securityContext: {
        ensureNonRoot: true,
        user: 1000,
        group: 1000,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        capabilities: { drop: [kplus.Capability.ALL] },
        seccompProfile: { type: kplus.SeccompProfileType.RUNTIME_DEFAULT },
      },
      resources: {
        cpu: { request: kplus.Cpu.millis(100), limit: kplus.Cpu.millis(500) },
        memory: {
          request: Size.mebibytes(OPERATOR_MEMORY.requestMiB),
          limit: Size.mebibytes(OPERATOR_MEMORY.limitMiB),
        },
      },
      // The image's own sleep (coreutils): works on every Kubernetes, unlike the kubelet's sleep action.
      ...(spec.preStopSeconds === undefined
        ? {}
        : { lifecycle: { preStop: kplus.Handler.fromCommand(['sleep', String(spec.preStopSeconds)]) } }),
      liveness: probe('/healthz'),
      // Discovery is down from a Pod's start until it is Ready: probe every second, so a new
      // or replacement Pod (a crash, a force-delete, a rollout) serves within a second of
      // being able to, instead of after two failed probes 10 s apart. Slow to leave: a busy
      // event loop (start-up on a loaded node) may answer late without being unready, so
      // 10 failures of 3 s each, not the default three of 1 s, take a Pod out of the Service.
      readiness: kplus.Probe.fromHttpGet('/readyz', {
        port: METRICS_PORT,
        periodSeconds: Duration.seconds(READINESS_PERIOD_SECONDS),
        timeoutSeconds: Duration.seconds(3),
        failureThreshold: 10,
      }),
      volumeMounts: [
        { path: PROVIDERS_CONFIG_DIR, volume: config, readOnly: true },
        // The root filesystem is read-only; Node and libraries may still want a scratch dir.
        { path: '/tmp', volume: tmp },
        // Empty unless an init container copies provider plugins in (README, "Provider plugins").
        { path: PLUGINS_DIR, volume: plugins, readOnly: true },
        ...(tokens === undefined ? [] : [{ path: DISCOVERY_TOKENS_DIR, volume: tokens, readOnly: true }]),
      ],
    });
    // cdk8s-plus labels the Pods with its construct path even when told not to select by it.
    ApiObject.of(deployment).addJsonPatch(
      JsonPatch.remove('/spec/template/metadata/labels/cdk8s.io~1metadata.addr'),
    );
    return deployment;
  }
}

interface DeploymentSpec {
  id: string;
  name: string;
  image: string;
  serviceAccount: kplus.ServiceAccount;
  providers: kplus.ConfigMap;
  labels: Readonly<Record<string, string>>;
  replicas: number;
  args: string[];
  annotations: Record<string, string>;
  strategy: kplus.DeploymentStrategy;
  /** Reads REDIS_PASSWORD from the Redis Secret. */
  redis?: boolean;
  preStopSeconds?: number;
}

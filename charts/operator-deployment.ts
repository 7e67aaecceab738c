import { ApiObject, Duration, JsonPatch, Size } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import {
  DISCOVERY_TOKENS_DIR,
  DISCOVERY_TOKENS_SECRET_KEY,
  DISCOVERY_TOKENS_SECRET_NAME,
  METRICS_PORT,
  OPERATOR_NAMESPACE,
  PLUGINS_DIR,
  PROVIDERS_CONFIG_DIR,
  PROVIDERS_CONFIG_KEY,
  READINESS_PERIOD_SECONDS,
  REDIS_SECRET_NAME,
  REDIS_SECRET_PASSWORD_KEY,
} from './names.js';

// One Deployment of the operator's image, whichever components it runs (--components in its
// args): the controller, the discovery API, the gateway, or the memory store's all-in-one Pod.

/**
 * The Pod's terminationGracePeriodSeconds. A graceful stop takes at most: the handlers' drain
 * (30 s; the discovery API's close, ≤ 10 s, and every daemon stop run alongside it) + 5 s for
 * what is still running once aborted + 10 s of cleanup hooks (providers closed) + 5 s for the
 * informers + 5 s for the Lease release = 55 s (the framework's shutdownBudgetSeconds()).
 * 60 s leaves the kubelet no reason to SIGKILL before the Lease is released;
 * test/cmd/shutdown-budget.unit.test.ts ties the two together.
 */
export const TERMINATION_GRACE_SECONDS = 60;
/** The /tmp emptyDir's sizeLimit (MiB): the operator writes nothing there itself. */
export const TMP_SIZE_LIMIT_MIB = 32;
/** The plugins emptyDir's sizeLimit (MiB): a provider plugin is a folder of JavaScript and its dependencies. */
export const PLUGINS_SIZE_LIMIT_MIB = 256;

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
/** A container port of the operator's image: its name is what Services and policies refer to. */
export interface OperatorPort {
  name: string;
  number: number;
}

export interface DeploymentSpec {
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
  /** The ports the Pod serves (metrics first: the probes use it). */
  ports: readonly OperatorPort[];
  /** Reads REDIS_PASSWORD from the Redis Secret. */
  redis?: boolean;
  preStopSeconds?: number;
}

export function operatorDeployment(scope: Construct, spec: DeploymentSpec): kplus.Deployment {
  const { image, serviceAccount, providers } = spec;
  const deployment = new kplus.Deployment(scope, spec.id, {
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

  // Bounded: the operator writes nothing there itself, so a runaway writer (a library, a
  // diagnostic report) gets this Pod evicted rather than filling the node's disk.
  const tmp = kplus.Volume.fromEmptyDir(scope, `${spec.id}-tmp`, 'tmp', {
    sizeLimit: Size.mebibytes(TMP_SIZE_LIMIT_MIB),
  });
  const plugins = kplus.Volume.fromEmptyDir(scope, `${spec.id}-plugins`, 'plugins', {
    sizeLimit: Size.mebibytes(PLUGINS_SIZE_LIMIT_MIB),
  });
  const config = kplus.Volume.fromConfigMap(scope, `${spec.id}-providers-config`, providers, {
    name: 'providers',
  });
  // The API is closed by default: a Pod that serves it mounts the tokens Secret, not
  // optionally, so without the Secret it does not start (kubectl describe names the Secret).
  const servesAPI = !spec.args.includes('--components=controller');
  const tokens = servesAPI
    ? kplus.Volume.fromSecret(
        scope,
        `${spec.id}-discovery-tokens`,
        kplus.Secret.fromSecretName(
          scope,
          `${spec.id}-discovery-tokens-secret`,
          DISCOVERY_TOKENS_SECRET_NAME,
        ),
        { name: 'discovery-tokens' },
      )
    : undefined;
  const redisSecret = kplus.Secret.fromSecretName(scope, `${spec.id}-redis`, REDIS_SECRET_NAME);
  const probe = (path: string) => kplus.Probe.fromHttpGet(path, { port: METRICS_PORT });

  deployment.addContainer({
    name: 'operator',
    image,
    // `kind load docker-image` puts the image on the node; Always would try a registry first.
    imagePullPolicy: kplus.ImagePullPolicy.IF_NOT_PRESENT,
    args: [`--providers-config=${PROVIDERS_CONFIG_DIR}/${PROVIDERS_CONFIG_KEY}`, ...spec.args],
    ports: spec.ports.map((p) => ({ name: p.name, number: p.number })),
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
        Object.entries(OPERATOR_RUNTIME_ENV).map(([name, value]) => [name, kplus.EnvValue.fromValue(value)]),
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

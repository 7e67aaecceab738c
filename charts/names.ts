// Names shared by the charts and by the tests that check the synthesized manifests, so a
// rename cannot leave a reference (RoleBinding subject, Service selector, ...) dangling.

/** Where the operator, its RBAC, its leader-election Lease and its Services live. */
export const OPERATOR_NAMESPACE = 'proxy-operator-system';
/** The kubernetes provider's Pods live here; the default providers config points at it. */
export const PROXIES_NAMESPACE = 'proxy-operator-proxies';
/**
 * The Squid image the shipped `kubernetes` provider runs for each proxy: pinned by digest (the
 * tag stays for the reader; the runtime pulls and checks the digest). The same as the
 * provider's own default (a test holds them equal; charts import only crds).
 */
export const SQUID_IMAGE =
  'ubuntu/squid:6.6-24.04_beta@sha256:6a097f68bae708cedbabd6188d68c7e2e7a38cedd05a176e1cc0ba29e3bbe029';
/** The operator container's readiness probe period. */
export const READINESS_PERIOD_SECONDS = 1;
export const OPERATOR_NAME = 'proxy-operator';
/** The controller's ServiceAccount (with the memory store, the one Pod's: controller and discovery). */
export const SERVICE_ACCOUNT_NAME = OPERATOR_NAME;
/** The Redis store's discovery Pods' own ServiceAccount: read Proxies and their Secrets, nothing else. */
export const DISCOVERY_SERVICE_ACCOUNT_NAME = 'proxy-operator-discovery';
/**
 * The --watch-namespace of the shipped manifests, where the quickstart's Proxies (dist/samples.yaml,
 * applied without -n) land. `WATCH_NAMESPACE=crawling npm run synth` generates the Roles for another.
 */
export const DEFAULT_WATCH_NAMESPACE = 'default';
/** On every namespace the charts create: the API server refuses Pods that are not "restricted". */
export const POD_SECURITY_LABELS = {
  'pod-security.kubernetes.io/enforce': 'restricted',
  'pod-security.kubernetes.io/enforce-version': 'latest',
  'pod-security.kubernetes.io/warn': 'restricted',
  'pod-security.kubernetes.io/audit': 'restricted',
} as const;
export const PROVIDERS_CONFIGMAP_NAME = 'proxy-operator-providers';
export const PROVIDERS_CONFIG_KEY = 'providers.yaml';
export const PROVIDERS_CONFIG_DIR = '/etc/proxy-operator';
/**
 * Where provider plugins delivered by an init container land (an emptyDir, read-only for the
 * operator): list `/opt/proxy-operator/plugins/<plugin>` under `plugins:` in providers.yaml.
 */
export const PLUGINS_DIR = '/opt/proxy-operator/plugins';
/** Optional: without it the discovery API serves unauthenticated (and says so at startup). */
/** The discovery API's tokens file ("<name>: <token>" lines), mounted into every API Pod. */
export const DISCOVERY_TOKENS_SECRET_NAME = 'proxy-operator-discovery-tokens';
export const DISCOVERY_TOKENS_SECRET_KEY = 'tokens';
export const DISCOVERY_TOKENS_DIR = '/etc/proxy-operator-tokens';
export const DISCOVERY_SERVICE_NAME = 'proxy-operator-discovery';
export const METRICS_SERVICE_NAME = 'proxy-operator-metrics';
/** The defaults of --metrics-address and --discovery-address (cmd/settings.ts). */
export const METRICS_PORT = 8080;
export const DISCOVERY_PORT = 8090;
/** The default of --gateway-address (cmd/settings.ts): the forward-proxy gateway's port. */
export const GATEWAY_PORT = 8888;
/** The gateway's Service (both topologies), and with the Redis store its Deployment, PDB and NetworkPolicy. */
export const GATEWAY_NAME = 'proxy-operator-gateway';
/** The Redis store's gateway Pods' own ServiceAccount: read Proxies and their Secrets, nothing else. */
export const GATEWAY_SERVICE_ACCOUNT_NAME = GATEWAY_NAME;
export const DEFAULT_IMAGE = 'proxy-operator:dev';

/** Labels on every object the charts create, and the Pod selector of the Deployment. */
export const APP_LABELS = {
  'app.kubernetes.io/name': OPERATOR_NAME,
  'app.kubernetes.io/part-of': 'proxy-operator',
} as const;

/** With the Redis lease store: the discovery API's own Deployment (and its PodDisruptionBudget). */
export const DISCOVERY_DEPLOYMENT_NAME = 'proxy-operator-discovery';
/** The Pods of each component (Redis store); the memory store's one Deployment keeps APP_LABELS. */
export const CONTROLLER_LABELS = { ...APP_LABELS, 'app.kubernetes.io/component': 'controller' } as const;
export const DISCOVERY_LABELS = { ...APP_LABELS, 'app.kubernetes.io/component': 'discovery' } as const;
export const GATEWAY_LABELS = { ...APP_LABELS, 'app.kubernetes.io/component': 'gateway' } as const;
/** The Secret REDIS_PASSWORD comes from (optional: a Redis without a password needs none). */
export const REDIS_SECRET_NAME = 'proxy-operator-redis';
export const REDIS_SECRET_PASSWORD_KEY = 'password';
/** The kind quickstart's Redis (dist/redis-sample.yaml): its Service, in the operator's namespace. */
export const REDIS_SAMPLE_NAME = 'proxy-operator-redis';
export const REDIS_PORT = 6379;
export const REDIS_SAMPLE_URL = `redis://${REDIS_SAMPLE_NAME}.${OPERATOR_NAMESPACE}.svc:${REDIS_PORT}`;
export const REDIS_IMAGE = 'redis:7.2';
/** Tells the metrics Service from the discovery one (both select the operator's Pods): the ServiceMonitor selects it. */
export const METRICS_COMPONENT_LABELS = { 'app.kubernetes.io/component': 'metrics' } as const;

// The operator itself; cmd/operator.ts loads it once the Node.js version is known to be right.
import 'reflect-metadata';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { builtinProviderRegistry } from '../providers/builtin.js';
import { connectRedis } from '../book/redis-connection.js';
import { readRedisServerFacts, redisServerProblem } from '../book/redis-server-check.js';
import { handlersFor } from '../handlers/components.js';
import type { LeaseStoreFactory } from '../handlers/lease-book.js';
import { createClientTokens, type ClientTokens } from '../handlers/client-tokens.js';
import { createProxyOperator } from '../handlers/proxy-operator.js';
import { redisLeaseStore } from '../handlers/redis-lease-book.js';
import { kubeSystemUID, resolveClusterName } from './cluster-name.js';
import { keySecretApi, onceResolved, resolveCredentialsKey } from './credentials-key.js';
import { leaderIdentity } from './leader-identity.js';
import {
  clientTokenSettings,
  clusterAddressesAdded,
  handlerSettingsFrom,
  leaderElectionFrom,
  needsOwnerIdentity,
} from './operator-options.js';
import {
  checkMaxUnavailableProviders,
  parseSettings,
  SettingsError,
  usage,
  type Settings,
} from './settings.js';

/** Used when no providers config is given: enough to try the operator with no cloud. */
export const EMBEDDED_PROVIDERS_CONFIG = 'providers:\n  - name: mock\n    type: mock\n';

/** A start-up mistake: said on stderr (and in the log once there is one), exit status 2. */
function fatal(message: string, logger?: Logger): never {
  logger?.fatal(message);
  process.stderr.write(`proxy-operator: ${message}\n`);
  process.exit(2);
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

async function main(): Promise<void> {
  let settings: Settings | 'help';
  try {
    settings = parseSettings(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof SettingsError) fatal(err.message);
    throw err;
  }
  if (settings === 'help') {
    process.stdout.write(`${usage()}\n`);
    return;
  }
  const logger = pino({ level: settings.logLevel, base: { app: 'proxy-operator' } });
  // From here on a SIGTERM always ends in a clean exit: before the operator exists there is
  // nothing to release; after, it stops gracefully (its own handlers replace this one).
  const early = (signal: NodeJS.Signals) => {
    logger.info({ signal }, 'shutting down before start-up finished');
    process.exit(0);
  };
  process.once('SIGTERM', early);
  process.once('SIGINT', early);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const providerRegistry = builtinProviderRegistry();
  let entries;
  let external;
  try {
    ({ entries, external } = settings.providersConfig
      ? await providerRegistry.loadConfig(settings.providersConfig)
      : providerRegistry.parseConfig(EMBEDDED_PROVIDERS_CONFIG, '<embedded default>'));
  } catch (err) {
    fatal(messageOf(err), logger);
  }
  if (!settings.providersConfig)
    logger.warn('no --providers-config given: using the embedded mock-only providers config');
  try {
    checkMaxUnavailableProviders(
      settings.controller.maxUnavailable,
      entries.map((e) => e.name),
    );
  } catch (err) {
    fatal(messageOf(err), logger);
  }
  // The tokens both doors read, loaded once here so a bad file stops start-up naming the flag
  // (one watcher re-reads it on change for the API and the gateway alike).
  let clientTokens: ClientTokens;
  try {
    clientTokens = createClientTokens(clientTokenSettings(settings.discoveryAuth), { registry, logger });
  } catch (err) {
    fatal(`--discovery-tokens-file: ${messageOf(err)}`, logger);
  }
  const probeCA = await readFlagFile('probe-ca-file', settings.probeCAFile, logger);
  const kubeConfig = new KubeConfig();
  try {
    if (settings.kubeconfig) kubeConfig.loadFromFile(settings.kubeconfig);
    else kubeConfig.loadFromDefault();
    if (!kubeConfig.getCurrentCluster()) throw new Error('it names no current cluster');
  } catch (err) {
    const which = settings.kubeconfig ?? '(in-cluster or ~/.kube/config)';
    fatal(`cannot load the kubeconfig ${which}: ${messageOf(err)}`, logger);
  }

  let clusterName: string;
  try {
    // Only the controller labels instances with it: a discovery-only Pod's account may not read Namespaces.
    clusterName = needsOwnerIdentity(settings.components)
      ? await resolveClusterName(settings.clusterName, () => kubeSystemUID(kubeConfig))
      : (settings.clusterName ?? '');
  } catch (err) {
    fatal(messageOf(err), logger);
  }
  logger.info(
    {
      clusterName,
      from: settings.clusterName === undefined ? 'kube-system Namespace UID' : '--cluster-name',
    },
    'owner identity',
  );

  // Read (or created) at the first reconcile, so by the leader only, and retried with the
  // reconcile's backoff: a namespace not there yet is waited for, as the Lease is.
  const credentialsKey = onceResolved(() =>
    resolveCredentialsKey(
      settings.leaderElectionNamespace,
      keySecretApi(kubeConfig, settings.leaderElectionNamespace),
    ),
  );

  const providers = await providerRegistry.build(entries, { logger, metrics: registry, kubeConfig });
  logger.info({ providers: providers.names() }, 'providers configured');

  const externalEndpoints = clusterAddressesAdded(external, {
    serviceHost: process.env.KUBERNETES_SERVICE_HOST,
    server: kubeConfig.getCurrentCluster()?.server,
  });
  logger.info({ externalEndpoints }, 'External endpoints: ranges allowed and cluster CIDRs');
  const handlerSettings = handlerSettingsFrom(settings, {
    clusterName,
    credentialsKey,
    probeCA,
    externalEndpoints,
  });
  const store = settings.leaseStore;
  let leaseStore: LeaseStoreFactory | undefined;
  if (store.kind === 'redis') {
    // Connects in the background: a Redis that is down at start-up means 503 store_unavailable
    // until it is up, not a crash loop.
    const ca = await readFlagFile('redis-ca-file', store.caFile, logger);
    const redis = connectRedis({
      url: store.url,
      password: store.password,
      username: store.username,
      timeoutMs: store.timeoutMs,
      ...(ca === undefined ? {} : { ca }),
      logger: logger.child({ component: 'lease-store' }),
    });
    // Each connection (the first, and every one after a failover) is checked: a server that
    // may evict the book's keys stops the process naming the flag, rather than serving bans
    // that can silently lift.
    redis.on('ready', () => {
      readRedisServerFacts(redis).then(
        (facts) => {
          const problem = redisServerProblem(facts, { allowEviction: store.allowEviction });
          if (problem !== undefined) fatal(`--redis-url: ${problem.message}`, logger);
        },
        (err: unknown) =>
          logger.warn(
            { err: { message: messageOf(err) } },
            'Redis lease store: cannot read INFO to check the server',
          ),
      );
    });
    leaseStore = redisLeaseStore(settings.book, redis, store.keyPrefix);
    logger.info(
      { url: redactedURL(store.url), keyPrefix: store.keyPrefix, tls: store.url.startsWith('rediss:') },
      'lease store: Redis',
    );
  }
  logger.info({ components: settings.components, leaseStore: store.kind }, 'components');

  const operator = createProxyOperator({
    kubeConfig,
    providers,
    logger,
    registry,
    handlers: handlersFor(settings.components),
    ...(leaseStore === undefined ? {} : { leaseStore }),
    clientTokens,
    settings: handlerSettings,
    leaderElection: leaderElectionFrom(settings, leaderIdentity(process.env.POD_NAME, hostname())),
    probeAddress: settings.metrics,
    namespace: settings.watchNamespace,
  });
  process.off('SIGTERM', early);
  process.off('SIGINT', early);
  operator.installSignalHandlers();
  try {
    await operator.start();
  } catch (err) {
    fatal(startFailure(err, settings), logger);
  }
  logger.info('operator started');
}

/** A file a flag names, read at start-up: one it cannot read stops start-up naming the flag. */
async function readFlagFile(
  flag: string,
  path: string | undefined,
  logger: Logger,
): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    fatal(`--${flag}: ${messageOf(err)}`, logger);
  }
}

function redactedURL(url: string): string {
  const parsed = new URL(url);
  if (parsed.password !== '') parsed.password = '***';
  return parsed.toString();
}

/**
 * A listening port the process cannot have is fatal at start-up, said with the flag that
 * chose it; any other start-up failure keeps its own message.
 */
function startFailure(err: unknown, settings: Settings): string {
  const e = err as NodeJS.ErrnoException & { port?: number; address?: string };
  if (e?.syscall === 'listen' || e?.code === 'EADDRINUSE') {
    const flag =
      e.port === settings.metrics.port
        ? 'metrics-address'
        : e.port === settings.discovery.port
          ? 'discovery-address'
          : e.port === settings.gateway.port
            ? 'gateway-address'
            : undefined;
    const where = `${e.address ?? '?'}:${e.port ?? '?'}`;
    const why = e.code === 'EADDRINUSE' ? 'the address is already in use' : `${e.code ?? e.message}`;
    return flag
      ? `--${flag}: cannot listen on ${where}: ${why}; stop what holds it or choose another with --${flag}`
      : `cannot listen on ${where}: ${why}`;
  }
  return `start-up failed: ${err instanceof Error ? err.message : String(err)}`;
}

await main().catch((err: unknown) => {
  process.stderr.write(
    `proxy-operator: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});

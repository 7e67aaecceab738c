import { eventually as pollUntil } from '../../framework/testing/index.js';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Operator } from '../../framework/index.js';
import type { ConditionType, Proxy } from '../../crds/proxy-types.js';
import { createProxyOperator, PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { DEFAULT_HANDLER_SETTINGS, type HandlerSettings } from '../../handlers/settings.js';
import type { Provider } from '../../providers/contract.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { ProviderSet } from '../../providers/registry.js';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';

export const quiet = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** Polls until `check` returns a value (not undefined) or the deadline passes. */
export function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  return pollUntil(what, check, { timeoutMs, intervalMs: 200 });
}

export async function createNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
}

export interface RunningOperator {
  operator: Operator;
  registry: Registry;
  stop(): Promise<void>;
  /** Stops without any cleanup (no lease release, in-flight handlers abandoned): a crash. */
  kill(): Promise<void>;
}

/** One operator over the given providers; `wrap` lets a test interpose on provider calls. */
export async function startOperator(
  kc: KubeConfig,
  providers: Record<string, Provider>,
  namespace: string,
  settings: Partial<HandlerSettings> = {},
  handlers = PROXY_HANDLERS,
  logger = quiet,
): Promise<RunningOperator> {
  const registry = new Registry();
  const operator = createProxyOperator({
    kubeConfig: kc,
    providers: new ProviderSet(new Map(Object.entries(providers))),
    settings: {
      ...DEFAULT_HANDLER_SETTINGS,
      healthSyncSeconds: 0.2,
      discovery: { ...DEFAULT_HANDLER_SETTINGS.discovery, host: '127.0.0.1', port: await freePort() },
      ...settings,
    },
    logger,
    registry,
    leaderElection: false,
    probeAddress: { host: '127.0.0.1', port: await freePort() },
    handlers,
    shutdownGraceSeconds: 1,
    // Each suite's operator sees only its own namespace, so suites never touch each other's proxies.
    namespace,
  });
  await operator.start();
  return { operator, registry, stop: () => operator.stop(), kill: () => operator.kill() };
}

export function mockProvider(
  opts: { serveTraffic?: boolean; provisioningSeconds?: number } = {},
): MockProvider {
  return new MockProvider(
    'mock',
    { provisioningSeconds: opts.provisioningSeconds ?? 0.3, serveTraffic: opts.serveTraffic ?? true },
    quiet,
  );
}

/** A fast health check against a local target, so proxies go Ready in seconds. */
export function fastHealthCheck(target: LocalTarget) {
  return {
    probeURL: target.probeURL,
    intervalSeconds: 2,
    timeoutSeconds: 1,
    failureThreshold: 1,
    successThreshold: 1,
  };
}

export function managedSpec(target: LocalTarget, extra: Record<string, unknown> = {}) {
  return {
    mode: 'Managed',
    provider: 'mock',
    placement: { zone: 'local-a', machineType: 'small', image: 'squid-1' },
    attributes: { geo: 'local' },
    healthCheck: fastHealthCheck(target),
    ...extra,
  };
}

export async function suiteSetup(
  kc: KubeConfig,
  namespace: string,
): Promise<{ api: ProxyApi; target: LocalTarget }> {
  await installProxyCrd(kc);
  await createNamespace(kc, namespace);
  return { api: new ProxyApi(kc, namespace), target: await startLocalTarget() };
}

export function condition(p: Proxy | undefined, type: ConditionType) {
  return p?.status?.conditions?.find((c) => c.type === type);
}

export async function eventsFor(
  kc: KubeConfig,
  namespace: string,
  name: string,
): Promise<Array<{ reason?: string; type?: string; message?: string }>> {
  const list = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items;
}

export async function deleteProxy(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  const { CustomObjectsApi } = await import('@kubernetes/client-node');
  await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({
    group: 'crawl.example.com',
    version: 'v1alpha1',
    namespace,
    plural: 'proxies',
    name,
  });
}

/** Drops every finalizer (a merge patch, so it never conflicts with the operator's writes). */
export async function dropFinalizers(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  const { CustomObjectsApi, PatchStrategy, setHeaderOptions } = await import('@kubernetes/client-node');
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
    {
      group: 'crawl.example.com',
      version: 'v1alpha1',
      namespace,
      plural: 'proxies',
      name,
      body: { metadata: { finalizers: null } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

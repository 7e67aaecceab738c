import { eventually as pollUntil } from '../../framework/testing/index.js';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { request, type Dispatcher } from 'undici';
import type { Operator } from '../../framework/index.js';
import type { ConditionType, Proxy } from '../../crds/proxy-types.js';
import { createProxyOperator, PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import type { LeaseStoreFactory } from '../../handlers/lease-book.js';
import { DEFAULT_HANDLER_SETTINGS, type HandlerSettings } from '../../handlers/settings.js';
import type { Provider } from '../../providers/contract.js';
import {
  DEFAULT_EXTERNAL_ENDPOINTS,
  type ExternalEndpointSettings,
} from '../../providers/endpoint-ranges.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import { ProviderSet } from '../../providers/registry.js';
import { startLocalTarget, type LocalTarget } from '../../cmd/demo/local-target.js';
import { freePort } from '../../framework/testing/control-plane.js';
import { installProxyCrd } from '../crd/install-proxy-crd.js';
import { ProxyApi } from '../crd/proxy-api.js';
import { testKubeConfig, uniqueName } from '../harness/kube.js';

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
  /** Where its discovery API listens: http://127.0.0.1:<port>. */
  discoveryURL: string;
  stop(): Promise<void>;
  /** Stops without any cleanup (no lease release, in-flight handlers abandoned): a crash. */
  kill(): Promise<void>;
}

/**
 * The tests' External proxies are real forward proxies on loopback: their operators allow
 * loopback endpoints explicitly (the product's default refuses them, issue 44 item 5).
 */
export const LOOPBACK_EXTERNAL: ExternalEndpointSettings = {
  ...DEFAULT_EXTERNAL_ENDPOINTS,
  allowRanges: ['loopback'],
};

/** The handler settings a test changes; `discovery` and `book` are merged into the defaults key by key. */
export type OperatorSettings = Partial<Omit<HandlerSettings, 'discovery' | 'book'>> & {
  discovery?: Partial<HandlerSettings['discovery']>;
  book?: Partial<HandlerSettings['book']>;
};

/**
 * One operator over the given providers; `wrap` lets a test interpose on provider calls.
 * `namespace` undefined: every namespace (only on a control plane of the suite's own: the shared
 * one holds the other suites' Proxies).
 */
export async function startOperator(
  kc: KubeConfig,
  providers: Record<string, Provider>,
  namespace: string | undefined,
  settings: OperatorSettings = {},
  handlers = PROXY_HANDLERS,
  logger = quiet,
  leaseStore?: LeaseStoreFactory,
): Promise<RunningOperator> {
  const registry = new Registry();
  const discovery = {
    ...DEFAULT_HANDLER_SETTINGS.discovery,
    host: '127.0.0.1',
    port: await freePort(),
    ...settings.discovery,
  };
  const operator = createProxyOperator({
    kubeConfig: kc,
    providers: new ProviderSet(new Map(Object.entries(providers))),
    // The tests' echo answers on loopback over plain http: accepted only with this setting.
    settings: {
      ...DEFAULT_HANDLER_SETTINGS,
      healthSyncSeconds: 0.2,
      // An instance being created or replaced, and a replacement waiting for a slot, is looked
      // at every second (--instance-poll-interval, 5 s by default): the paced rollouts here run
      // many rounds, each of which waited out 5 s polls against a mock that starts in 0.3 s.
      instancePollSeconds: 1,
      exitIPAllowNonPublic: true,
      externalEndpoints: LOOPBACK_EXTERNAL,
      ...settings,
      discovery,
      book: { ...DEFAULT_HANDLER_SETTINGS.book, ...settings.book },
    },
    logger,
    registry,
    ...(leaseStore ? { leaseStore } : {}),
    leaderElection: false,
    probeAddress: { host: '127.0.0.1', port: await freePort() },
    handlers,
    shutdownGraceSeconds: 1,
    // Each suite's operator sees only its own namespace, so suites never touch each other's proxies.
    namespace,
  });
  await operator.start();
  return {
    operator,
    registry,
    discoveryURL: `http://${discovery.host}:${discovery.port}`,
    stop: () => operator.stop(),
    kill: () => operator.kill(),
  };
}

/** A discovery API answer: the status and the JSON body (undefined when there is none, as for a 204). */
export interface DiscoveryAnswer {
  status: number;
  body: Record<string, unknown>;
}

/** One call to the discovery API at `baseURL`, with a JSON body when one is given. */
export async function callDiscovery(
  baseURL: string,
  method: Dispatcher.HttpMethod,
  path: string,
  body?: unknown,
): Promise<DiscoveryAnswer> {
  const response = await request(`${baseURL}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    body: (text === '' ? undefined : JSON.parse(text)) as Record<string, unknown>,
  };
}

/** What a suite's operator is given besides its namespace. */
export interface OperatorSuiteOptions {
  /** The suite's mock provider (default: instances up in 0.3 s, serving traffic). */
  mock?: Parameters<typeof mockProvider>[0];
  /** The providers by name, made from the suite's mock provider (default: `{ mock }`). */
  providers?: (mock: MockProvider) => Record<string, Provider>;
  settings?: OperatorSettings;
  /** The handler classes (default: all of them). */
  handlers?: typeof PROXY_HANDLERS;
  logger?: Logger;
  /** The lease book's store, made when the suite starts (default: the in-memory store). */
  leaseStore?: () => LeaseStoreFactory;
}

/** One suite's operator on the shared control plane: see operatorSuite. */
export class OperatorSuite {
  /** The suite's Proxies, in its namespace. */
  readonly api: ProxyApi;
  private localTarget?: LocalTarget;
  private mockProvider?: MockProvider;
  private running?: RunningOperator;

  constructor(
    readonly kc: KubeConfig,
    readonly namespace: string,
  ) {
    this.api = new ProxyApi(kc, namespace);
  }

  /** The local site the health checks probe (its /ip echoes a proxy's exit IP). */
  get target(): LocalTarget {
    return this.started(this.localTarget);
  }

  /** The mock provider the suite's providers were made from. */
  get mock(): MockProvider {
    return this.started(this.mockProvider);
  }

  get op(): RunningOperator {
    return this.started(this.running);
  }

  /** One call to the operator's discovery API. */
  readonly call = (method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<DiscoveryAnswer> =>
    callDiscovery(this.op.discoveryURL, method, path, body);

  async start(options: OperatorSuiteOptions): Promise<void> {
    const {
      providers = (mock: MockProvider) => ({ mock }),
      settings = {},
      handlers,
      logger,
      leaseStore,
    } = options;
    this.localTarget = (await suiteSetup(this.kc, this.namespace)).target;
    this.mockProvider = mockProvider(options.mock);
    this.running = await startOperator(
      this.kc,
      providers(this.mockProvider),
      this.namespace,
      settings,
      handlers,
      logger,
      leaseStore?.(),
    );
  }

  async stop(): Promise<void> {
    await this.running?.stop();
    await this.mockProvider?.close();
    await this.localTarget?.close();
  }

  private started<T>(value: T | undefined): T {
    if (value === undefined)
      throw new Error(`the suite in ${this.namespace} is not started: read it in a test or a hook`);
    return value;
  }
}

/**
 * One suite's operator on the shared control plane. Registers the suite's `beforeAll` (the
 * CRD, a namespace of its own named after `name`, a local probe target, a mock provider and the
 * operator over `providers(mock)`) and its `afterAll` (all of it stopped and closed). The
 * target, the mock and the operator are there from the `beforeAll` on.
 */
export function operatorSuite(name: string, options: OperatorSuiteOptions = {}): OperatorSuite {
  const suite = new OperatorSuite(testKubeConfig(), uniqueName(name));
  beforeAll(() => suite.start(options));
  afterAll(() => suite.stop());
  return suite;
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

/** The Proxy `name` if it is Ready and Healthy, else undefined: a check for `eventually`. */
export async function readyProxy(api: ProxyApi, name: string): Promise<Proxy | undefined> {
  const p = await api.get(name);
  return isReady(p) ? p : undefined;
}

/** Ready and Healthy: what a crawler may lease. */
export function isReady(p: Proxy): boolean {
  return p.status?.phase === 'Ready' && condition(p, 'Healthy')?.status === 'True';
}

/** The Proxies `names`, once every one of them passes `test`. */
export function everyProxy(
  api: ProxyApi,
  names: readonly string[],
  what: string,
  test: (p: Proxy) => boolean,
  timeoutMs = 60_000,
): Promise<Proxy[]> {
  return eventually(
    what,
    async () => {
      const ps = await Promise.all(names.map((n) => api.get(n)));
      return ps.every(test) ? ps : undefined;
    },
    timeoutMs,
  );
}

/** proxy_operator_replacements_total of one cause, as the operator's registry holds it. */
export async function replacementsCounted(registry: Registry, cause: string): Promise<number> {
  const m = await registry.getSingleMetric('proxy_operator_replacements_total')?.get();
  return m?.values.find((v) => v.labels.cause === cause)?.value ?? 0;
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

/**
 * The Events about `name` once every one of `reasons` is among them. A handler posts its
 * Events after the status write a test waits for, so a list read at once can miss them.
 */
export function eventsOnceThere(
  kc: KubeConfig,
  namespace: string,
  name: string,
  ...reasons: string[]
): Promise<Array<{ reason?: string; type?: string; message?: string }>> {
  return eventually(`Events ${reasons.join(', ')} about ${name}`, async () => {
    const events = await eventsFor(kc, namespace, name);
    return reasons.every((r) => events.some((e) => e.reason === r)) ? events : undefined;
  });
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

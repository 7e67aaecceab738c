import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { parseAllDocuments } from 'yaml';
import { ControlPlane, freePort } from '../../framework/control-plane/index.js';
import type { Progress } from '../../framework/control-plane/index.js';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import { startForwardProxy, type ForwardProxy } from '../../providers/mock/forward-proxy.js';
import type { ProviderSet } from '../../providers/registry.js';
import type { Operator } from '../../framework/index.js';
import { randomBytes } from 'node:crypto';
import { createProxyOperator, PROXY_HANDLERS } from '../../handlers/proxy-operator.js';
import { GatewayRunner } from '../../handlers/gateway-runner.js';
import { DEFAULT_GATEWAY_SETTINGS, DEFAULT_HANDLER_SETTINGS } from '../../handlers/settings.js';
import type { DemoOptions } from './args.js';
import { startDemoSite, type DemoSite } from './demo-site.js';
import { startLocalTarget, type LocalTarget } from './local-target.js';

export interface DemoEnvironment {
  controlPlane: ControlPlane;
  kubeConfig: KubeConfig;
  operator: Operator;
  providers: ProviderSet;
  target: LocalTarget;
  externalProxy: ForwardProxy;
  /** Linked pages to crawl through the proxies (the Crawlee recipe of docs/crawling.md). */
  site: DemoSite;
  discoveryURL: string;
  metricsURL: string;
  /** The forward-proxy gateway (docs/gateway.md) and the token it takes as the proxy password. */
  gateway: { address: string; token: string };
  /** What `npm run demo -- <flags>` asked for (proxies, token, strict site). */
  options: DemoOptions;
  close(): Promise<void>;
}

export interface DemoEnvironmentOptions {
  root: string;
  logger: Logger;
  progress: Progress;
  /** Preferred discovery port; a free one is used when it is taken. */
  discoveryPort?: number;
  /** Preferred port of the demo site; a free one is used when it is taken. */
  sitePort?: number;
  /** Preferred port of the gateway; a free one is used when it is taken. */
  gatewayPort?: number;
  /** `--proxies`, `--token`, `--site`; default one Managed proxy, an open API, a lenient site. */
  options?: DemoOptions;
}

/**
 * `preferred` when it is free on 127.0.0.1, else a free port, said loudly through `warn`
 * naming both (a second demo, or anything else on the port, must not move quietly).
 */
export async function portOr(
  preferred: number | undefined,
  what: string,
  warn: (line: string) => void,
): Promise<number> {
  if (preferred === undefined) return freePort();
  const { createServer } = await import('node:net');
  const chosen = await new Promise<number | undefined>((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(undefined));
    srv.listen(preferred, '127.0.0.1', () => srv.close(() => resolve(preferred)));
  });
  if (chosen !== undefined) return chosen;
  const other = await freePort();
  warn(
    `WARNING: port ${preferred} is taken (another demo still running?): ${what} listens on 127.0.0.1:${other} instead of 127.0.0.1:${preferred}`,
  );
  return other;
}

/**
 * Installs the CRDs of a multi-document YAML file with server-side apply, through the
 * generated untyped call: KubernetesObjectApi's typed model would drop `default` and
 * `x-kubernetes-validations` from the schema.
 */
export async function applyCRDs(kc: KubeConfig, path: string): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const docs = parseAllDocuments(await readFile(path, 'utf8'), { version: '1.1' })
    .map((d) => d.toJS() as (KubernetesObject & { metadata: { name: string } }) | null)
    .filter(
      (d): d is KubernetesObject & { metadata: { name: string } } => d?.kind === 'CustomResourceDefinition',
    );
  for (const body of docs) {
    await api.patchCustomResourceDefinition(
      { name: body.metadata.name, body, fieldManager: 'proxy-operator-demo', force: true },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    );
  }
}

/** Starts everything the demo needs on loopback; close() tears it all down. */
export async function startDemoEnvironment(opts: DemoEnvironmentOptions): Promise<DemoEnvironment> {
  const cleanups: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    const controlPlane = await ControlPlane.start({
      progress: opts.progress,
      dirPrefix: 'proxy-operator-cp-',
    });
    cleanups.push(() => controlPlane.stop());
    const kubeConfig = controlPlane.kubeConfig();
    opts.progress('installing the Proxy CRD from dist/crds.yaml');
    await applyCRDs(kubeConfig, join(opts.root, 'dist', 'crds.yaml'));
    await waitForCRD(kubeConfig);

    const target = await startLocalTarget();
    cleanups.push(() => target.close());
    const externalProxy = await startForwardProxy({ host: '127.0.0.2', port: await freePort() });
    cleanups.push(() => externalProxy.close());
    const options: DemoOptions = opts.options ?? { managedProxies: 1 };
    const site = await startDemoSite(
      await portOr(opts.sitePort, 'the demo site', opts.progress),
      undefined,
      options.site,
    );
    cleanups.push(() => site.close());

    const registry = new Registry();
    const providerRegistry = builtinProviderRegistry();
    // The demo's External proxy is a forward proxy on 127.0.0.2: its config allows loopback
    // endpoints explicitly (the default refuses them, docs/security.md).
    const { entries, external } = providerRegistry.parseConfig(
      'providers:\n  - name: mock\n    type: mock\n    mock:\n      provisioningSeconds: 2\n      serveTraffic: true\n' +
        'external:\n  allowEndpointRanges: [loopback]\n',
      '<demo providers config>',
    );
    const providers = await providerRegistry.build(entries, {
      logger: opts.logger,
      metrics: registry,
      kubeConfig,
    });
    cleanups.push(() => providers.close());

    const discoveryPort = await portOr(opts.discoveryPort, 'the discovery API', opts.progress);
    const metricsPort = await freePort();
    const gatewayPort = await portOr(opts.gatewayPort, 'the gateway', opts.progress);
    // With --token the discovery API is closed and the gateway takes the same token (it
    // takes the discovery API's tokens); without, the API stays open and the gateway gets
    // a token of its own (demoToken): it is never an open proxy.
    const gatewayToken = options.token ?? `demo-${randomBytes(12).toString('hex')}`;
    const operator = createProxyOperator({
      kubeConfig,
      providers,
      logger: opts.logger,
      registry,
      settings: {
        ...DEFAULT_HANDLER_SETTINGS,
        healthSyncSeconds: 1,
        // The demo's echo is the local target's /ip, on loopback over plain http.
        exitIPAllowNonPublic: true,
        externalEndpoints: external,
        discovery: {
          ...DEFAULT_HANDLER_SETTINGS.discovery,
          host: '127.0.0.1',
          port: discoveryPort,
          token: options.token ?? '',
        },
        gateway: {
          ...DEFAULT_GATEWAY_SETTINGS,
          host: '127.0.0.1',
          port: gatewayPort,
          // A finished gateway lease is released after 2 s (not 15): the demo's next steps
          // and its test see every lease back soon after step 8.
          idleSeconds: 2,
          ...(options.token === undefined ? { demoToken: gatewayToken } : {}),
        },
      },
      handlers: [...PROXY_HANDLERS, GatewayRunner] as typeof PROXY_HANDLERS,
      leaderElection: false,
      probeAddress: { host: '127.0.0.1', port: metricsPort },
      shutdownGraceSeconds: 5,
    });
    opts.progress('starting the operator (mock provider serving real proxies on 127.0.0.x)');
    await operator.start();
    cleanups.push(() => operator.stop());
    return {
      controlPlane,
      kubeConfig,
      operator,
      providers,
      target,
      externalProxy,
      site,
      discoveryURL: `http://127.0.0.1:${discoveryPort}`,
      metricsURL: `http://127.0.0.1:${metricsPort}`,
      gateway: { address: `127.0.0.1:${gatewayPort}`, token: gatewayToken },
      options,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

async function waitForCRD(kc: KubeConfig): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const crd = (await client.read({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'proxies.crawl.example.com' },
    })) as KubernetesObject & { status?: { conditions?: Array<{ type: string; status: string }> } };
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the Proxy CRD did not become Established within 30 s');
}

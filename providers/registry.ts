import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Provider } from './contract.js';
import {
  loadProvidersConfig,
  parseProvidersConfig,
  type ConfigSchema,
  type ProviderEntry,
} from './config.js';
import type { ConfigObject } from './config-reader.js';
import { MeteredProvider, providerRequestsCounter } from './metered.js';

/** DI token for the ProviderSet built at startup. */
export const PROVIDERS = Symbol('ProviderSet');

/** What every provider factory may use, shared by all configured instances. */
export interface ProviderDeps {
  logger: Logger;
  /** Where proxy_operator_provider_requests_total is registered. */
  metrics: Registry;
  /** Only providers that manage Kubernetes objects need it. */
  kubeConfig?: KubeConfig;
}

export interface ProviderContext<C> {
  /** The configured instance name, e.g. "gcp-eu": used in errors, logs and metrics. */
  name: string;
  config: C;
  /** Already bound to { provider: name }. */
  logger: Logger;
  kubeConfig?: KubeConfig;
}

/** A provider that holds resources (sockets, gRPC channels) to release at shutdown. */
export type OwnedProvider = Provider & { close?(): Promise<void> };

/** Everything a provider type contributes: its config block reader and its constructor. */
export interface ProviderType<C> {
  /** The `type:` value in the config file; also the key of its settings block. */
  readonly type: string;
  readonly parseConfig: ConfigSchema<C>;
  create(ctx: ProviderContext<C>): OwnedProvider | Promise<OwnedProvider>;
}

/**
 * A parsed entry's settings bound to the type that parsed them, so building never needs to
 * cast `unknown` back to the type's config.
 */
export interface BoundSettings {
  readonly config: unknown;
  create(name: string, deps: ProviderDeps): Promise<OwnedProvider>;
}

/** The configured providers by name, each wrapped in the request counter. */
export class ProviderSet {
  constructor(
    private readonly byName: ReadonlyMap<string, Provider>,
    private readonly owned: readonly OwnedProvider[] = [],
  ) {}

  get(name: string): Provider | undefined {
    return this.byName.get(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  entries(): [string, Provider][] {
    return [...this.byName.entries()];
  }

  /** Releases sockets and channels the providers hold (mock proxies, gRPC clients). */
  async close(): Promise<void> {
    await Promise.allSettled(this.owned.map((p) => p.close?.()));
  }
}

/** Maps provider type → (config reader, factory). A new provider = one folder + one register(). */
export class ProviderRegistry {
  private readonly schemas = new Map<string, ConfigSchema<BoundSettings>>();

  register<C>(providerType: ProviderType<C>): this {
    if (this.schemas.has(providerType.type)) {
      throw new Error(`provider type "${providerType.type}" is registered twice`);
    }
    this.schemas.set(providerType.type, (block: ConfigObject) => {
      const config = providerType.parseConfig(block);
      return {
        config,
        create: async (name, deps) =>
          providerType.create({
            name,
            config,
            logger: deps.logger.child({ provider: name }),
            kubeConfig: deps.kubeConfig,
          }),
      };
    });
    return this;
  }

  types(): string[] {
    return [...this.schemas.keys()].sort();
  }

  parse(text: string, file: string): ProviderEntry<BoundSettings>[] {
    return parseProvidersConfig(text, file, this.schemas);
  }

  load(path: string): Promise<ProviderEntry<BoundSettings>[]> {
    return loadProvidersConfig(path, this.schemas);
  }

  /** Instantiates every entry; on a failure, closes the ones already built and rethrows. */
  async build(entries: readonly ProviderEntry<BoundSettings>[], deps: ProviderDeps): Promise<ProviderSet> {
    const requests = providerRequestsCounter(deps.metrics);
    const byName = new Map<string, Provider>();
    const owned: OwnedProvider[] = [];
    try {
      for (const entry of entries) {
        const provider = await entry.settings.create(entry.name, deps);
        owned.push(provider);
        byName.set(entry.name, new MeteredProvider(provider, entry.name, requests));
      }
    } catch (err) {
      await new ProviderSet(byName, owned).close();
      throw err;
    }
    return new ProviderSet(byName, owned);
  }
}

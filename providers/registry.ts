import 'reflect-metadata';
import { dirname } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { container as rootContainer, type DependencyContainer, type InjectionToken } from 'tsyringe';
import type { Provider } from './contract.js';
import {
  parseProvidersFile,
  pluginSpecs,
  readProvidersFile,
  type ConfigSchema,
  type ProviderEntry,
  type ProvidersConfig,
} from './config.js';
import { ProvidersConfigError, type ConfigObject } from './config-reader.js';
import { MeteredProvider, providerRequestsCounter } from './metered.js';
import { loadPlugin, PluginLoadError } from './plugin-loader.js';
import {
  PROVIDER_KUBECONFIG,
  PROVIDER_LOGGER,
  PROVIDER_METRICS,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  providerTypeOf,
  type OwnedProvider,
  type ProviderClass,
  type ProviderTypeInfo,
} from './provider-class.js';

export type { OwnedProvider } from './provider-class.js';

/** What every provider may be given, shared by all configured instances. */
export interface ProviderDeps {
  logger: Logger;
  /** Where proxy_operator_provider_requests_total is registered; injected as PROVIDER_METRICS. */
  metrics: Registry;
  /** Only providers that manage Kubernetes objects need it (PROVIDER_KUBECONFIG). */
  kubeConfig?: KubeConfig;
}

/**
 * A parsed entry's settings bound to the class that parsed them, so building never needs to
 * cast `unknown` back to the type's config.
 */
export interface BoundSettings {
  readonly config: unknown;
  readonly type: string;
  create(name: string, scope: DependencyContainer, logger: Logger): OwnedProvider;
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

  /** Releases sockets and channels the providers hold (mock proxies, SDK clients). */
  async close(): Promise<void> {
    await Promise.allSettled(this.owned.map((p) => p.close?.()));
  }
}

interface RegisteredType {
  cls: ProviderClass;
  info: ProviderTypeInfo;
  /** "built-in" or `plugin "<spec>"`: named in conflicts and config errors. */
  origin: string;
}

/**
 * Provider types by name, learnt from @provider-decorated classes (built-ins and plugins).
 * Parsing a providers file checks each entry with its type's config reader; building
 * resolves each entry's class through tsyringe with its settings, logger, metrics registry
 * and kube config injected.
 */
export class ProviderRegistry {
  private readonly registered = new Map<string, RegisteredType>();

  /** Registers a decorated class; a type name already taken is an error naming both origins. */
  register(cls: ProviderClass, origin = 'built-in'): this {
    const info = providerTypeOf(cls);
    if (!info) {
      throw new Error(
        `${cls?.name || 'the class'} (${origin}) is not a provider class: declare it with @provider({ type, config })`,
      );
    }
    const existing = this.registered.get(info.type);
    if (existing) {
      throw new Error(
        `provider type "${info.type}" of ${origin} (${cls.name}) is already registered by ${existing.origin} (${existing.cls.name})`,
      );
    }
    this.registered.set(info.type, { cls, info, origin });
    return this;
  }

  types(): string[] {
    return [...this.registered.keys()].sort();
  }

  /** Parses a providers file's text. Plugins it lists must have been loaded (see load()). */
  parse(text: string, file: string): ProviderEntry<BoundSettings>[] {
    return this.parseConfig(text, file).entries;
  }

  /** As parse(), with the file's `external:` block (where External endpoints may be). */
  parseConfig(text: string, file: string): ProvidersConfig<BoundSettings> {
    return parseProvidersFile(text, file, this.schemas());
  }

  /**
   * Reads the providers file at `path`, loads the plugins it lists (paths relative to the
   * file, or npm package names) and parses its entries. Any failure is a ProvidersConfigError
   * naming the file and the plugin or entry.
   */
  async load(path: string): Promise<ProviderEntry<BoundSettings>[]> {
    return (await this.loadConfig(path)).entries;
  }

  /** As load(), with the file's `external:` block. */
  async loadConfig(path: string): Promise<ProvidersConfig<BoundSettings>> {
    const text = await readProvidersFile(path);
    const specs = pluginSpecs(text, path);
    for (const [index, spec] of specs.entries()) {
      const where = `${path}: plugins[${index}] "${spec}"`;
      const classes = await loadPlugin(spec, dirname(path), where);
      for (const cls of classes) {
        try {
          this.register(cls, `plugin "${spec}"`);
        } catch (err) {
          throw new PluginLoadError(`${where}: ${(err as Error).message}`, { cause: err });
        }
      }
    }
    return this.parseConfig(text, path);
  }

  /** Instantiates every entry; on a failure, closes the ones already built and rethrows. */
  async build(entries: readonly ProviderEntry<BoundSettings>[], deps: ProviderDeps): Promise<ProviderSet> {
    const requests = providerRequestsCounter(deps.metrics);
    const shared = rootContainer.createChildContainer();
    shared.register(PROVIDER_METRICS, { useValue: deps.metrics });
    if (deps.kubeConfig) shared.register(PROVIDER_KUBECONFIG, { useValue: deps.kubeConfig });
    else
      shared.register(PROVIDER_KUBECONFIG, {
        useFactory: () => {
          throw new Error('needs a KubeConfig in its dependencies');
        },
      });
    // One scope per type: classes a type shares are singletons there.
    const typeScopes = new Map<string, DependencyContainer>();
    const scopeOf = (type: string): DependencyContainer => {
      let scope = typeScopes.get(type);
      if (!scope) {
        scope = shared.createChildContainer();
        for (const cls of this.registered.get(type)?.info.shared ?? []) scope.registerSingleton(cls);
        typeScopes.set(type, scope);
      }
      return scope;
    };

    const byName = new Map<string, Provider>();
    const owned: OwnedProvider[] = [];
    try {
      for (const entry of entries) {
        const provider = entry.settings.create(entry.name, scopeOf(entry.settings.type), deps.logger);
        owned.push(provider);
        byName.set(entry.name, new MeteredProvider(provider, entry.name, requests));
      }
    } catch (err) {
      await new ProviderSet(byName, owned).close();
      throw err;
    }
    return new ProviderSet(byName, owned);
  }

  private schemas(): Map<string, ConfigSchema<BoundSettings>> {
    const schemas = new Map<string, ConfigSchema<BoundSettings>>();
    for (const [type, { cls, info, origin }] of this.registered) {
      schemas.set(type, (block: ConfigObject) => {
        const config = readBlock(info, block, origin);
        return {
          config,
          type,
          create: (name, scope, logger) => construct(cls, { name, type, config, scope, logger }),
        };
      });
    }
    return schemas;
  }
}

/** Runs a type's config reader; a plugin's rejection names the plugin. */
function readBlock(info: ProviderTypeInfo, block: ConfigObject, origin: string): unknown {
  try {
    return info.config(block);
  } catch (err) {
    if (origin === 'built-in') throw err;
    const message = err instanceof Error ? err.message : String(err);
    const located = err instanceof ProvidersConfigError ? message : block.failureMessage('', message);
    throw new ProvidersConfigError(`${located} (type "${info.type}" from ${origin})`, { cause: err });
  }
}

function construct(
  cls: ProviderClass,
  ctx: { name: string; type: string; config: unknown; scope: DependencyContainer; logger: Logger },
): OwnedProvider {
  const scope = ctx.scope.createChildContainer();
  scope.register(PROVIDER_NAME, { useValue: ctx.name });
  scope.register(PROVIDER_SETTINGS, { useValue: ctx.config });
  scope.register(PROVIDER_LOGGER, { useValue: ctx.logger.child({ provider: ctx.name }) });
  try {
    return scope.resolve(cls as unknown as InjectionToken<OwnedProvider>);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new Error(`provider ${ctx.name} (type ${ctx.type}): ${message.replace(/\s+/g, ' ')}`, {
      cause: err,
    });
  }
}

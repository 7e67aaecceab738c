// Provider classes declare themselves with @provider({ type, config }): the registry learns a
// type from the class itself, so adding a provider never means editing a central list.
import 'reflect-metadata';
import { injectable } from 'tsyringe';
import type { ConfigSchema } from './config.js';
import type { Provider } from './contract.js';

// DI tokens for what a provider's constructor may ask for. Symbol.for keeps them the same
// symbols even if a plugin ends up with its own copy of this module.

/** The configured instance name (`name:` in the providers file), e.g. "gcp-eu". */
export const PROVIDER_NAME = Symbol.for('proxy-operator.provider.name');
/** What the type's config reader produced from the entry's block. */
export const PROVIDER_SETTINGS = Symbol.for('proxy-operator.provider.settings');
/** A pino logger already bound to { provider: name }. */
export const PROVIDER_LOGGER = Symbol.for('proxy-operator.provider.logger');
/** The operator's prom-client Registry (served on /metrics). */
export const PROVIDER_METRICS = Symbol.for('proxy-operator.provider.metrics');
/** The operator's KubeConfig (@kubernetes/client-node), for providers that manage Kubernetes objects. */
export const PROVIDER_KUBECONFIG = Symbol.for('proxy-operator.provider.kubeconfig');

/** A provider that holds resources (sockets, clients) to release at shutdown. */
export type OwnedProvider = Provider & { close?(): Promise<void> };

/** Any class whose instances are providers. */
export type ProviderClass = new (...args: never[]) => OwnedProvider;

/** A class one instance of which every provider of the type shares within one operator. */
export type SharedClass = new (...args: never[]) => unknown;

export interface ProviderTypeOptions<C> {
  /** The `type:` value in the providers file, and the key of the entry's settings block. */
  type: string;
  /** Reads (and validates) the settings block into what the constructor gets as PROVIDER_SETTINGS. */
  config: ConfigSchema<C>;
  /** Classes injected as one shared instance per operator (e.g. an address allocator). */
  shared?: readonly SharedClass[];
}

export interface ProviderTypeInfo {
  readonly type: string;
  readonly config: ConfigSchema<unknown>;
  readonly shared: readonly SharedClass[];
}

const TYPE_INFO = Symbol.for('proxy-operator.provider.type');

/** Type names are YAML keys and appear in messages: DNS-label shaped. */
export const PROVIDER_TYPE_PATTERN = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Declares a provider class: its type name and config reader. Its constructor's
 * dependencies are injected by tsyringe (`@inject(PROVIDER_SETTINGS)` and the other tokens).
 *
 * ```ts
 * @provider({ type: 'example', config: parseExampleConfig })
 * export class ExampleProvider implements Provider {
 *   constructor(@inject(PROVIDER_SETTINGS) settings: ExampleSettings, @inject(PROVIDER_LOGGER) logger: Logger) {}
 * }
 * ```
 */
export function provider<C>(options: ProviderTypeOptions<C>) {
  if (typeof options?.type !== 'string' || !PROVIDER_TYPE_PATTERN.test(options.type)) {
    throw new Error(
      `@provider: type ${JSON.stringify(options?.type)} must be lowercase letters, digits and '-', starting with a letter (<= 63 chars)`,
    );
  }
  if (typeof options.config !== 'function') {
    throw new Error(
      `@provider({ type: "${options.type}" }): config must be the function that reads its block`,
    );
  }
  const info: ProviderTypeInfo = Object.freeze({
    type: options.type,
    config: options.config as ConfigSchema<unknown>,
    shared: Object.freeze([...(options.shared ?? [])]),
  });
  return <T extends ProviderClass>(target: T): T => {
    injectable()(target as never);
    Object.defineProperty(target, TYPE_INFO, { value: info, enumerable: false });
    return target;
  };
}

/** The @provider declaration of a class (its own, not inherited), or undefined. */
export function providerTypeOf(value: unknown): ProviderTypeInfo | undefined {
  if (typeof value !== 'function' || !Object.prototype.hasOwnProperty.call(value, TYPE_INFO))
    return undefined;
  return (value as unknown as Record<symbol, ProviderTypeInfo>)[TYPE_INFO];
}

/** Every decorated provider class a module exports, in export order. */
export function providerClassesIn(moduleNamespace: Record<string, unknown>): ProviderClass[] {
  const found = new Set<ProviderClass>();
  for (const value of Object.values(moduleNamespace)) {
    if (providerTypeOf(value)) found.add(value as ProviderClass);
  }
  return [...found];
}

import 'reflect-metadata';
import { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { inject } from 'tsyringe';
import { BUILTIN_PROVIDER_CLASSES, builtinProviderRegistry } from '../../providers/builtin.js';
import type { CreateRequest, Instance, Provider } from '../../providers/contract.js';
import { MeteredProvider, PROVIDER_REQUESTS_METRIC } from '../../providers/metered.js';
import { MockProvider } from '../../providers/mock/mock-provider.js';
import {
  PROVIDER_KUBECONFIG,
  PROVIDER_LOGGER,
  PROVIDER_METRICS,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
  providerTypeOf,
} from '../../providers/provider-class.js';
import { ProviderRegistry } from '../../providers/registry.js';

const logger = pino({ level: 'silent' });

const request: CreateRequest = {
  uid: 'u',
  proxy: 'n/p',
  namespace: 'n',
  owner: 'test-owner',
  port: 3128,
  placement: {},
};

interface EchoSettings {
  greeting: string;
}

/** Everything an injected echo provider was given, for the assertions. */
const built: Array<{ name: string; settings: EchoSettings; logger: Logger; metrics: Registry }> = [];
const closed: string[] = [];

/** The smallest possible provider class: what a new provider's author writes. */
@provider({ type: 'echo', config: (block) => ({ greeting: block.string('greeting', 'hello') }) })
class EchoProvider implements Provider {
  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: EchoSettings,
    @inject(PROVIDER_LOGGER) logger: Logger,
    @inject(PROVIDER_METRICS) metrics: Registry,
  ) {
    built.push({ name, settings, logger, metrics });
  }
  async create(req: CreateRequest) {
    return `${this.settings.greeting}-${req.uid}`;
  }
  async get(id: string): Promise<Instance> {
    return {
      id,
      ip: '',
      state: 'Running',
      uid: this.name,
      owner: 'o',
      namespace: 'ns',
      revision: '',
      createdAt: new Date(0),
    };
  }
  async delete() {}
  async listByTag() {
    return [];
  }
  async close() {
    closed.push(this.name);
  }
}

@provider({ type: 'needs-kube', config: () => ({}) })
class NeedsKube implements Provider {
  constructor(@inject(PROVIDER_KUBECONFIG) readonly kubeConfig: KubeConfig) {}
  create = async () => '';
  get = async (): Promise<Instance> => {
    throw new Error('unused');
  };
  delete = async () => undefined;
  listByTag = async () => [];
}

@provider({ type: 'broken', config: () => ({}) })
class Broken implements Provider {
  constructor() {
    throw new Error('cannot reach the cloud');
  }
  create = async () => '';
  get = async (): Promise<Instance> => {
    throw new Error('unused');
  };
  delete = async () => undefined;
  listByTag = async () => [];
}

beforeEach(() => {
  built.length = 0;
  closed.length = 0;
});

describe('a provider class', () => {
  it('declares its type and config reader with @provider', () => {
    expect(providerTypeOf(EchoProvider)).toMatchObject({ type: 'echo', shared: [] });
    expect(providerTypeOf(class Plain {})).toBeUndefined();
    // Not inherited: a subclass is a provider type only if it declares one itself.
    expect(providerTypeOf(class Sub extends EchoProvider {})).toBeUndefined();
  });

  it.each(['', 'Echo', 'my_provider', '-x', 'x'.repeat(64)])('may not be named %p', (type) => {
    expect(() => provider({ type, config: () => ({}) })).toThrow(/must be lowercase letters, digits and '-'/);
  });
});

describe('the provider registry', () => {
  it("builds a named, metered provider per entry, injecting the entry's settings, a bound logger and the metrics registry", async () => {
    const registry = new ProviderRegistry().register(EchoProvider);
    const entries = registry.parse(
      'providers:\n  - name: a\n    type: echo\n  - name: b\n    type: echo\n    echo: { greeting: hi }\n',
      'p.yaml',
    );
    const metrics = new Registry();
    const set = await registry.build(entries, { logger, metrics });

    expect(set.names()).toEqual(['a', 'b']);
    expect(set.get('a')).toBeInstanceOf(MeteredProvider);
    expect(set.get('missing')).toBeUndefined();
    expect(built.map((b) => [b.name, b.settings])).toEqual([
      ['a', { greeting: 'hello' }],
      ['b', { greeting: 'hi' }],
    ]);
    expect(built.every((b) => b.metrics === metrics)).toBe(true);
    expect(built[1].logger.bindings()).toMatchObject({ provider: 'b' });
    await expect(set.get('a')!.create(request)).resolves.toBe('hello-u');
    await expect(set.get('b')!.create(request)).resolves.toBe('hi-u');
    const counted = (await metrics.getSingleMetric(PROVIDER_REQUESTS_METRIC)!.get()).values;
    expect(counted.map((v) => [v.labels.provider, v.labels.op, v.labels.result, v.value])).toEqual([
      ['a', 'create', 'ok', 1],
      ['b', 'create', 'ok', 1],
    ]);
  });

  it('closes what the providers hold', async () => {
    const registry = new ProviderRegistry().register(EchoProvider);
    const set = await registry.build(
      registry.parse('providers:\n  - name: a\n    type: echo\n  - name: b\n    type: echo\n', 'p.yaml'),
      { logger, metrics: new Registry() },
    );
    await set.close();
    expect(closed).toEqual(['a', 'b']);
  });

  it('refuses a type registered twice, naming both origins', () => {
    @provider({ type: 'echo', config: () => ({}) })
    class OtherEcho extends EchoProvider {}
    expect(() => new ProviderRegistry().register(EchoProvider).register(OtherEcho, 'plugin "x"')).toThrow(
      'provider type "echo" of plugin "x" (OtherEcho) is already registered by built-in (EchoProvider)',
    );
  });

  it('refuses a class that is not declared with @provider', () => {
    expect(() => new ProviderRegistry().register(class Plain {} as never)).toThrow(
      'Plain (built-in) is not a provider class: declare it with @provider({ type, config })',
    );
  });

  it('injects the KubeConfig, and names it when it is missing', async () => {
    const registry = new ProviderRegistry().register(NeedsKube);
    const entries = registry.parse('providers:\n  - name: k\n    type: needs-kube\n', 'p.yaml');
    await expect(registry.build(entries, { logger, metrics: new Registry() })).rejects.toThrow(
      /^provider k \(type needs-kube\): .*needs a KubeConfig in its dependencies/,
    );
    const kubeConfig = new KubeConfig();
    const set = await registry.build(entries, { logger, metrics: new Registry(), kubeConfig });
    expect(set.names()).toEqual(['k']);
  });

  it('names the provider whose constructor fails, and closes the ones already built', async () => {
    const registry = new ProviderRegistry().register(EchoProvider).register(Broken);
    const entries = registry.parse(
      'providers:\n  - name: first\n    type: echo\n  - name: second\n    type: broken\n',
      'p.yaml',
    );
    await expect(registry.build(entries, { logger, metrics: new Registry() })).rejects.toThrow(
      /^provider second \(type broken\): .*cannot reach the cloud/,
    );
    expect(closed).toEqual(['first']);
  });
});

describe('the built-in providers', () => {
  it('are learnt from their decorated classes, one folder each: no list to edit', () => {
    expect(BUILTIN_PROVIDER_CLASSES.map((c) => providerTypeOf(c)!.type).sort()).toEqual([
      'aws',
      'gcp',
      'kubernetes',
      'mock',
    ]);
    expect(builtinProviderRegistry().types()).toEqual(['aws', 'gcp', 'kubernetes', 'mock']);
  });

  it('builds the kubernetes provider only with a KubeConfig, saying so otherwise', async () => {
    const registry = builtinProviderRegistry();
    const entries = registry.parse('providers:\n  - name: k8s\n    type: kubernetes\n', 'p.yaml');
    await expect(registry.build(entries, { logger, metrics: new Registry() })).rejects.toThrow(
      /provider k8s \(type kubernetes\): .*needs a KubeConfig/,
    );
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const set = await registry.build(entries, { logger, metrics: new Registry(), kubeConfig });
    expect(set.names()).toEqual(['k8s']);
  });

  it('builds a mock provider set that works end to end', async () => {
    const registry = builtinProviderRegistry();
    const set = await registry.build(
      registry.parse(
        'providers:\n  - name: mock\n    type: mock\n    mock: { provisioningSeconds: 0 }\n',
        'p.yaml',
      ),
      { logger, metrics: new Registry() },
    );
    const mock = set.get('mock')!;
    const id = await mock.create(request);
    await expect(mock.get(id)).resolves.toMatchObject({
      state: 'Running',
      ip: expect.stringMatching(/^10\.99\./),
    });
    await set.close();
  });

  it('gives the mock providers of one operator one shared loopback allocator, and another operator its own', async () => {
    const registry = builtinProviderRegistry();
    const text = 'providers:\n  - name: m1\n    type: mock\n  - name: m2\n    type: mock\n';
    const loopbackOf = (p: Provider) =>
      ((p as unknown as { inner: MockProvider }).inner as unknown as { loopback: unknown }).loopback;
    const one = await registry.build(registry.parse(text, 'p.yaml'), { logger, metrics: new Registry() });
    const two = await registry.build(registry.parse(text, 'p.yaml'), { logger, metrics: new Registry() });
    expect(loopbackOf(one.get('m1')!)).toBeDefined();
    expect(loopbackOf(one.get('m1')!)).toBe(loopbackOf(one.get('m2')!));
    expect(loopbackOf(two.get('m1')!)).not.toBe(loopbackOf(one.get('m1')!));
  });
});

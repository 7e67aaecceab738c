import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import type { Instance, Provider } from '../../providers/contract.js';
import { PROVIDER_REQUESTS_METRIC } from '../../providers/metered.js';
import { MeteredProvider } from '../../providers/metered.js';
import { PROVIDERS, ProviderRegistry, type ProviderType } from '../../providers/registry.js';

const logger = pino({ level: 'silent' });

/** The smallest possible provider type: what a new provider's author writes. */
function echoType(closed: string[] = []): ProviderType<{ greeting: string }> {
  return {
    type: 'echo',
    parseConfig: (block) => ({ greeting: block.string('greeting', 'hello') }),
    create: ({ name, config }) => {
      const provider: Provider & { close(): Promise<void> } = {
        create: async (req) => `${config.greeting}-${req.uid}`,
        get: async (id): Promise<Instance> => ({
          id,
          ip: '',
          state: 'Running',
          uid: name,
          owner: 'o',
          namespace: 'ns',
          revision: '',
          createdAt: new Date(0),
        }),
        delete: async () => undefined,
        listByTag: async () => [],
        close: async () => {
          closed.push(name);
        },
      };
      return provider;
    },
  };
}

describe('the provider registry', () => {
  it("builds a named, metered provider per config entry from its type's typed config", async () => {
    const registry = new ProviderRegistry().register(echoType());
    const entries = registry.parse(
      'providers:\n  - name: a\n    type: echo\n  - name: b\n    type: echo\n    echo: { greeting: hi }\n',
      'p.yaml',
    );
    const metrics = new Registry();
    const set = await registry.build(entries, { logger, metrics });

    expect(set.names()).toEqual(['a', 'b']);
    expect(set.get('a')).toBeInstanceOf(MeteredProvider);
    expect(set.get('missing')).toBeUndefined();
    await expect(
      set
        .get('a')!
        .create({ uid: 'u', proxy: 'n/p', namespace: 'n', owner: 'test-owner', port: 1, placement: {} }),
    ).resolves.toBe('hello-u');
    await expect(
      set
        .get('b')!
        .create({ uid: 'u', proxy: 'n/p', namespace: 'n', owner: 'test-owner', port: 1, placement: {} }),
    ).resolves.toBe('hi-u');
    const counted = (await metrics.getSingleMetric(PROVIDER_REQUESTS_METRIC)!.get()).values;
    expect(counted.map((v) => [v.labels.provider, v.labels.op, v.labels.result, v.value])).toEqual([
      ['a', 'create', 'ok', 1],
      ['b', 'create', 'ok', 1],
    ]);
  });

  it('closes what the providers hold', async () => {
    const closed: string[] = [];
    const registry = new ProviderRegistry().register(echoType(closed));
    const set = await registry.build(registry.parse('providers:\n  - name: a\n    type: echo\n', 'p.yaml'), {
      logger,
      metrics: new Registry(),
    });
    await set.close();
    expect(closed).toEqual(['a']);
  });

  it('refuses to register a type twice', () => {
    expect(() => new ProviderRegistry().register(echoType()).register(echoType())).toThrow(
      /"echo" is registered twice/,
    );
  });

  it('ships mock, gcp and kubernetes', () => {
    expect(builtinProviderRegistry().types()).toEqual(['gcp', 'kubernetes', 'mock']);
  });

  it('builds the kubernetes provider only with a KubeConfig, saying so otherwise', async () => {
    const registry = builtinProviderRegistry();
    const entries = registry.parse('providers:\n  - name: k8s\n    type: kubernetes\n', 'p.yaml');
    await expect(registry.build(entries, { logger, metrics: new Registry() })).rejects.toThrow(
      'provider k8s (type kubernetes) needs a KubeConfig',
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
    const id = await mock.create({
      uid: 'u',
      proxy: 'n/p',
      namespace: 'n',
      owner: 'test-owner',
      port: 3128,
      placement: {},
    });
    await expect(mock.get(id)).resolves.toMatchObject({
      state: 'Running',
      ip: expect.stringMatching(/^10\.99\./),
    });
    await set.close();
  });

  it('exports a Symbol DI token for the set', () => {
    expect(typeof PROVIDERS).toBe('symbol');
  });
});

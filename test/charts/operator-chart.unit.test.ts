import type { V1ConfigMap, V1Deployment, V1EnvVar, V1Service } from '@kubernetes/client-node';
import {
  DEFAULT_WATCH_NAMESPACE,
  DISCOVERY_PORT,
  GATEWAY_PORT,
  METRICS_PORT,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
  PLUGINS_DIR,
  PROVIDERS_CONFIGMAP_NAME,
  PROXIES_NAMESPACE,
  SERVICE_ACCOUNT_NAME,
  SQUID_IMAGE,
} from '../../charts/names.js';
import { spawnSync } from 'node:child_process';
import { OPERATOR_MEMORY } from '../../charts/operator-chart.js';
import { PLUGINS_SIZE_LIMIT_MIB, TMP_SIZE_LIMIT_MIB } from '../../charts/operator-deployment.js';
import { REDIS_DATA_SIZE_LIMIT } from '../../charts/redis-sample-chart.js';
import { parseSettings } from '../../cmd/settings.js';
import { builtinProviderRegistry } from '../../providers/builtin.js';
import { KUBERNETES_DEFAULTS } from '../../providers/kubernetes/config.js';
import { chartObjects, find, type Manifest } from './manifests.js';

const operator = chartObjects().get('operator')!;
const deployment = find(operator, 'Deployment', OPERATOR_NAME, OPERATOR_NAMESPACE) as unknown as V1Deployment;
const pod = deployment.spec!.template.spec!;
const container = pod.containers[0];

function env(name: string): V1EnvVar {
  const found = container.env?.find((e) => e.name === name);
  if (!found) throw new Error(`container has no env ${name}`);
  return found;
}

describe('the operator Deployment', () => {
  it.each<[string, () => unknown, unknown]>([
    ['runs exactly one replica', () => deployment.spec!.replicas, 1],
    [
      'says why it runs one replica',
      () => deployment.metadata!.annotations!['proxy-operator.crawl.example.com/replicas-reason'],
      expect.stringMatching(/in memory per replica.*Recreate.*two books never serve at once/s),
    ],
    [
      // With the memory store, two Pods would be two lease books behind one Service.
      'stops the old Pod before starting the new one on a rollout (Recreate)',
      () => deployment.spec!.strategy,
      { type: 'Recreate' },
    ],
    ['runs the image built by the Dockerfile', () => container.image, 'proxy-operator:dev'],
    ['uses the image already on the node (kind load)', () => container.imagePullPolicy, 'IfNotPresent'],
    ['runs as the operator ServiceAccount', () => pod.serviceAccountName, SERVICE_ACCOUNT_NAME],
    ['mounts the ServiceAccount token', () => pod.automountServiceAccountToken, true],
    [
      // The gateway shares the one Pod's in-memory book (test/charts/gateway-chart.unit.test.ts).
      'reads the mounted providers config, runs controller, discovery and gateway, and watches the namespace its Roles are in',
      () => container.args,
      [
        '--providers-config=/etc/proxy-operator/providers.yaml',
        '--components=controller,discovery,gateway',
        `--watch-namespace=${DEFAULT_WATCH_NAMESPACE}`,
      ],
    ],
    ['runs as non-root', () => container.securityContext!.runAsNonRoot, true],
    ['runs as uid 1000', () => container.securityContext!.runAsUser, 1000],
    ['has a read-only root filesystem', () => container.securityContext!.readOnlyRootFilesystem, true],
    ['cannot escalate privileges', () => container.securityContext!.allowPrivilegeEscalation, false],
    ['drops every capability', () => container.securityContext!.capabilities, { drop: ['ALL'] }],
    [
      'uses the runtime default seccomp profile',
      () => container.securityContext!.seccompProfile,
      { type: 'RuntimeDefault' },
    ],
    [
      'requests and limits CPU and memory',
      () => container.resources,
      { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '500m', memory: '384Mi' } },
    ],
    [
      'is live while /healthz answers on the metrics port',
      () => container.livenessProbe!.httpGet,
      expect.objectContaining({ path: '/healthz', port: METRICS_PORT }),
    ],
    [
      'is ready once /readyz answers on the metrics port',
      () => container.readinessProbe!.httpGet,
      expect.objectContaining({ path: '/readyz', port: METRICS_PORT }),
    ],
    [
      'is probed for readiness every second from its start, so a replacement serves at once, and leaves the Service only after 10 slow answers',
      () => container.readinessProbe,
      expect.objectContaining({ periodSeconds: 1, timeoutSeconds: 3, failureThreshold: 10 }),
    ],
    [
      'exposes the metrics, discovery and gateway ports',
      () => container.ports,
      [
        { name: 'metrics', containerPort: METRICS_PORT },
        { name: 'discovery', containerPort: DISCOVERY_PORT },
        { name: 'gateway', containerPort: GATEWAY_PORT },
      ],
    ],
    [
      'takes its namespace from the downward API (leader-election Lease)',
      () => env('POD_NAMESPACE').valueFrom,
      { fieldRef: { fieldPath: 'metadata.namespace' } },
    ],
    [
      'takes its Pod name from the downward API (Lease holder)',
      () => env('POD_NAME').valueFrom,
      { fieldRef: { fieldPath: 'metadata.name' } },
    ],
    ['keeps glibc to two malloc arenas', () => env('MALLOC_ARENA_MAX').value, '2'],
    [
      'reads the discovery tokens from the mounted Secret (closed by default)',
      () => env('DISCOVERY_TOKENS_FILE').value,
      '/etc/proxy-operator-tokens/tokens',
    ],
  ])('%s', (_what, actual, expected) => {
    expect(actual()).toEqual(expected);
  });

  it.each<[string, string, Record<string, unknown>]>([
    ['the providers ConfigMap', '/etc/proxy-operator', { configMap: { name: PROVIDERS_CONFIGMAP_NAME } }],
    [
      'a writable emptyDir of bounded size (the root filesystem is read-only)',
      '/tmp',
      { emptyDir: { sizeLimit: `${TMP_SIZE_LIMIT_MIB}Mi` } },
    ],
    [
      'the plugins emptyDir an init container fills, of bounded size',
      PLUGINS_DIR,
      { emptyDir: { sizeLimit: `${PLUGINS_SIZE_LIMIT_MIB}Mi` } },
    ],
    [
      'the discovery tokens Secret, not optional: without it the Pod does not start',
      '/etc/proxy-operator-tokens',
      { secret: { secretName: 'proxy-operator-discovery-tokens' } },
    ],
  ])('mounts %s at %s', (_what, path, source) => {
    const mount = container.volumeMounts?.find((m) => m.mountPath === path);
    expect(mount).toBeDefined();
    if (path !== '/tmp') expect(mount!.readOnly).toBe(true);
    expect(pod.volumes?.find((v) => v.name === mount!.name)).toEqual({ name: mount!.name, ...source });
  });

  it("caps Node's heap well inside the memory limit, leaving room for what lives outside it", () => {
    // Node itself, run with the container's NODE_OPTIONS: the flags must parse, and the heap
    // V8 will grow to plus what bench:memory measured outside the heap (binary, TLS, malloc)
    // must fit under the limit, so V8 collects harder before the kernel would OOM-kill.
    const run = spawnSync(
      process.execPath,
      ['-e', 'process.stdout.write(String(require("node:v8").getHeapStatistics().heap_size_limit))'],
      { env: { PATH: process.env.PATH, NODE_OPTIONS: env('NODE_OPTIONS').value }, encoding: 'utf8' },
    );
    expect(run.stderr).toBe('');
    const heapLimitMiB = Number(run.stdout) / 2 ** 20;
    const limitMiB = OPERATOR_MEMORY.limitMiB;
    expect(container.resources!.limits!.memory).toBe(`${limitMiB}Mi`);
    expect(heapLimitMiB).toBeGreaterThan(OPERATOR_MEMORY.oldSpaceMiB);
    expect(heapLimitMiB + OPERATOR_MEMORY.measuredOutsideHeapMiB).toBeLessThanOrEqual(limitMiB);
    // The request covers the measured steady state at 1,000 proxies, the limit its peak.
    expect(OPERATOR_MEMORY.requestMiB).toBeGreaterThanOrEqual(OPERATOR_MEMORY.measuredSteadyMiB);
    expect(limitMiB).toBeGreaterThanOrEqual(1.5 * OPERATOR_MEMORY.measuredPeakMiB);
  });

  it('takes another image from the synth options ($IMAGE of npm run synth)', () => {
    const objects = chartObjects({ image: 'registry.example.com/proxy-operator:1.2.3' }).get('operator')!;
    const d = find(objects, 'Deployment', OPERATOR_NAME) as unknown as V1Deployment;
    expect(d.spec!.template.spec!.containers[0].image).toBe('registry.example.com/proxy-operator:1.2.3');
  });

  it('passes arguments the operator accepts, and its ports are the ones the operator listens on', () => {
    const settings = parseSettings(container.args ?? [], {
      ...plainEnv(container),
      POD_NAMESPACE: OPERATOR_NAMESPACE,
    });
    if (settings === 'help') throw new Error('the Deployment asks for --help');
    expect(settings.providersConfig).toBe('/etc/proxy-operator/providers.yaml');
    expect(settings.metrics.port).toBe(METRICS_PORT);
    expect(settings.discovery.port).toBe(DISCOVERY_PORT);
    expect(settings.leaderElect).toBe(true);
    expect(settings.leaderElectionNamespace).toBe(OPERATOR_NAMESPACE);
  });
});

describe('the operator Services', () => {
  const podLabels = deployment.spec!.template.metadata!.labels!;

  it.each([
    ['proxy-operator-discovery', DISCOVERY_PORT],
    ['proxy-operator-metrics', METRICS_PORT],
  ])('%s serves port %i from the operator Pods', (name, port) => {
    const service = find(operator, 'Service', name, OPERATOR_NAMESPACE) as unknown as V1Service;
    const selector = service.spec!.selector!;
    expect(Object.keys(selector).length).toBeGreaterThan(0);
    expect(podLabels).toEqual(expect.objectContaining(selector));
    expect(service.spec!.ports).toEqual([expect.objectContaining({ port, targetPort: port })]);
    expect(container.ports!.map((p) => p.containerPort)).toContain(port);
  });
});

describe('the providers ConfigMap', () => {
  const text = (find(operator, 'ConfigMap', PROVIDERS_CONFIGMAP_NAME) as unknown as V1ConfigMap).data![
    'providers.yaml'
  ];
  const entries = builtinProviderRegistry().parse(text, 'providers.yaml');

  it('is a providers config the operator accepts, with the kubernetes and mock providers', () => {
    expect(entries.map((e) => [e.name, e.type])).toEqual([
      ['kubernetes', 'kubernetes'],
      ['mock', 'mock'],
    ]);
  });

  it('runs Squid Pods in the namespace the operator may create Pods in', () => {
    expect(entries[0].settings.config).toEqual({
      ...KUBERNETES_DEFAULTS,
      namespace: PROXIES_NAMESPACE,
      image: SQUID_IMAGE,
    });
  });

  it("runs the provider's own pinned Squid image", () => {
    expect(SQUID_IMAGE).toBe(KUBERNETES_DEFAULTS.image);
  });

  it('names the Squid image by digest wherever the manifests name it (issue 44 item 5)', () => {
    const named = [...chartObjects().values()]
      .flatMap((objects) => objects)
      .flatMap((o) => JSON.stringify(o).match(/ubuntu\/squid[^"\\\s]*/g) ?? []);
    expect(named.length).toBeGreaterThan(0);
    expect(new Set(named)).toEqual(new Set([SQUID_IMAGE]));
    expect(SQUID_IMAGE).toMatch(/@sha256:[0-9a-f]{64}$/);
  });
});

describe('the operator chart', () => {
  const kinds = (o: Manifest) => `${o.kind}/${o.metadata.name}`;

  it('creates its own namespace and the kubernetes provider namespace, before anything else', () => {
    expect(operator.slice(0, 2).map(kinds)).toEqual([
      `Namespace/${OPERATOR_NAMESPACE}`,
      `Namespace/${PROXIES_NAMESPACE}`,
    ]);
  });

  it('puts every namespaced object in the operator namespace, or, for a Role, in the provider or watched namespace', () => {
    const cluster = ['Namespace', 'ClusterRole', 'ClusterRoleBinding'];
    for (const o of operator.filter((x) => !cluster.includes(x.kind))) {
      expect([kinds(o), o.metadata.namespace]).toEqual([
        kinds(o),
        ['Role', 'RoleBinding'].includes(o.kind)
          ? expect.stringMatching(
              new RegExp(`^(proxy-operator-(system|proxies)|${DEFAULT_WATCH_NAMESPACE})$`),
            )
          : OPERATOR_NAMESPACE,
      ]);
    }
    for (const o of operator.filter((x) => cluster.includes(x.kind)))
      expect(o.metadata.namespace).toBeUndefined();
  });
});

describe('the Redis lease store variant (dist/operator-redis.yaml)', () => {
  const objects = chartObjects().get('operator-redis')!;
  const deploymentOf = (name: string) =>
    find(objects, 'Deployment', name, OPERATOR_NAMESPACE) as unknown as V1Deployment;
  const controller = deploymentOf(OPERATOR_NAME);
  const discovery = deploymentOf('proxy-operator-discovery');
  const containerOf = (d: V1Deployment) => d.spec!.template.spec!.containers[0];
  const settingsOf = (d: V1Deployment) => {
    const s = parseSettings(containerOf(d).args ?? [], {
      ...plainEnv(containerOf(d)),
      POD_NAMESPACE: OPERATOR_NAMESPACE,
    });
    if (s === 'help') throw new Error('asks for --help');
    return s;
  };

  it.each<[string, () => unknown, unknown]>([
    ['the controller runs the controller only', () => settingsOf(controller).components, ['controller']],
    [
      'the discovery Deployment runs the discovery API only',
      () => settingsOf(discovery).components,
      ['discovery'],
    ],
    [
      'both share the book in the sample Redis',
      () => [settingsOf(controller).leaseStore, settingsOf(discovery).leaseStore],
      Array(2).fill(
        expect.objectContaining({
          kind: 'redis',
          url: 'redis://proxy-operator-redis.proxy-operator-system.svc:6379',
        }),
      ),
    ],
    ['the discovery API runs two replicas', () => discovery.spec!.replicas, 2],
    [
      'a discovery rollout starts a new Pod before stopping an old one',
      () => discovery.spec!.strategy,
      { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    ],
    [
      'a discovery Pod keeps serving 5 s after it is told to stop (endpoints drain first)',
      () => containerOf(discovery).lifecycle,
      { preStop: { exec: { command: ['sleep', '5'] } } },
    ],
    [
      'its grace period covers the pause and the graceful stop',
      () => discovery.spec!.template.spec!.terminationGracePeriodSeconds,
      65,
    ],
    [
      'says why readiness does not follow Redis',
      () => discovery.metadata!.annotations!['proxy-operator.crawl.example.com/store-readiness'],
      expect.stringMatching(/503 store_unavailable/),
    ],
    [
      'reads REDIS_PASSWORD from a required Secret, never from a flag or a ConfigMap',
      () =>
        [controller, discovery].map(
          (d) => containerOf(d).env!.find((e) => e.name === 'REDIS_PASSWORD')!.valueFrom,
        ),
      Array(2).fill({ secretKeyRef: { name: 'proxy-operator-redis', key: 'password', optional: false } }),
    ],
  ])('%s', (_what, actual, expected) => {
    expect(actual()).toEqual(expected);
  });

  it('keeps one discovery Pod through voluntary disruptions (a PodDisruptionBudget)', () => {
    const pdb = find(objects, 'PodDisruptionBudget', 'proxy-operator-discovery', OPERATOR_NAMESPACE) as {
      spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
    } & Manifest;
    expect(pdb.spec.minAvailable).toBe(1);
    expect(discovery.spec!.template.metadata!.labels).toEqual(
      expect.objectContaining(pdb.spec.selector.matchLabels),
    );
    expect(controller.spec!.template.metadata!.labels).not.toEqual(
      expect.objectContaining(pdb.spec.selector.matchLabels),
    );
  });

  it('sends discovery traffic to the discovery Pods only, metrics from both', () => {
    const selectorOf = (name: string) =>
      (find(objects, 'Service', name, OPERATOR_NAMESPACE) as unknown as V1Service).spec!.selector!;
    const labels = (d: V1Deployment) => d.spec!.template.metadata!.labels!;
    expect(labels(discovery)).toEqual(expect.objectContaining(selectorOf('proxy-operator-discovery')));
    expect(labels(controller)).not.toEqual(expect.objectContaining(selectorOf('proxy-operator-discovery')));
    for (const d of [controller, discovery])
      expect(labels(d)).toEqual(expect.objectContaining(selectorOf('proxy-operator-metrics')));
  });

  it('a Redis for the quickstart: a Service at the URL both Deployments use, with no eviction', () => {
    const sample = chartObjects().get('redis-sample')!;
    const service = find(
      sample,
      'Service',
      'proxy-operator-redis',
      OPERATOR_NAMESPACE,
    ) as unknown as V1Service;
    expect(service.spec!.ports).toEqual([expect.objectContaining({ port: 6379 })]);
    const redis = find(
      sample,
      'Deployment',
      'proxy-operator-redis',
      OPERATOR_NAMESPACE,
    ) as unknown as V1Deployment;
    expect(redis.spec!.template.metadata!.labels).toEqual(expect.objectContaining(service.spec!.selector));
    expect(redis.spec!.template.spec!.containers[0].args).toEqual(
      expect.arrayContaining(['--maxmemory-policy', 'noeviction']),
    );
    // Its append-only file lives on an emptyDir of bounded size (a runaway file evicts the
    // Pod instead of filling the node's disk).
    expect(redis.spec!.template.spec!.volumes).toEqual([
      { name: 'data', emptyDir: { sizeLimit: REDIS_DATA_SIZE_LIMIT } },
    ]);
  });

  describe('the sample Redis: a password from a Secret, reachable from the operator only', () => {
    const sample = chartObjects().get('redis-sample')!;
    const redis = find(
      sample,
      'Deployment',
      'proxy-operator-redis',
      OPERATOR_NAMESPACE,
    ) as unknown as V1Deployment;
    const [container] = redis.spec!.template.spec!.containers;
    const policy = find(
      sample,
      'NetworkPolicy',
      'proxy-operator-redis',
      OPERATOR_NAMESPACE,
    ) as unknown as RawNetworkPolicy;
    const operatorPods = chartObjects()
      .get('operator-redis')!
      .filter((o) => o.kind === 'Deployment')
      .map((d) => (d as unknown as V1Deployment).spec!.template.metadata!.labels!);
    const fromSecret = { secretKeyRef: { name: 'proxy-operator-redis', key: 'password' } };
    it.each<[string, () => unknown, unknown]>([
      [
        'requires the password (the kubelet expands it from the env)',
        () => container.args!.slice(0, 2),
        ['--requirepass', '$(REDIS_PASSWORD)'],
      ],
      [
        'reads it from the Secret the operator reads',
        () => container.env!.find((e) => e.name === 'REDIS_PASSWORD')!.valueFrom,
        fromSecret,
      ],
      [
        'gives the probe (redis-cli) the same',
        () => container.env!.find((e) => e.name === 'REDISCLI_AUTH')!.valueFrom,
        fromSecret,
      ],
      ['holds no literal value in its env', () => container.env!.filter((e) => e.value !== undefined), []],
      ['has no ConfigMap at all in the sample', () => sample.filter((o) => o.kind === 'ConfigMap'), []],
      [
        'selects the Redis Pods in its NetworkPolicy',
        () => policy.spec.podSelector.matchLabels,
        redis.spec!.template.metadata!.labels,
      ],
      [
        'admits ingress only, on the Redis port only',
        () => [policy.spec.policyTypes, policy.spec.ingress.map((r) => r.ports)],
        [['Ingress'], [[{ protocol: 'TCP', port: 6379 }]]],
      ],
      [
        'admits the Pods of both operator Deployments',
        () =>
          operatorPods.every((labels) =>
            Object.entries(policy.spec.ingress[0].from![0].podSelector!.matchLabels!).every(
              ([k, v]) => labels[k] === v,
            ),
          ),
        true,
      ],
      [
        'admits no other Pod (not Redis itself, not a crawler)',
        () =>
          [redis.spec!.template.metadata!.labels!, { app: 'crawler' }].some(
            (labels: Record<string, string>) =>
              Object.entries(policy.spec.ingress[0].from![0].podSelector!.matchLabels!).every(
                ([k, v]) => labels[k] === v,
              ),
          ),
        false,
      ],
      [
        'admits from its own namespace only (no namespaceSelector)',
        () => policy.spec.ingress[0].from!.map((f) => f.namespaceSelector),
        [undefined],
      ],
    ])('%s', (_what, actual, expected) => {
      expect(actual()).toEqual(expected);
    });
  });
});

/** The container's literal environment (what the process reads besides its flags). */
function plainEnv(c: { env?: { name: string; value?: string }[] }): Record<string, string> {
  return Object.fromEntries((c.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
}

/** A NetworkPolicy as the manifest spells it (the client's type renames `from` to `_from`). */
interface RawNetworkPolicy {
  spec: {
    podSelector: { matchLabels?: Record<string, string> };
    policyTypes: string[];
    ingress: Array<{
      from?: Array<{ podSelector?: { matchLabels?: Record<string, string> }; namespaceSelector?: unknown }>;
      ports?: unknown[];
    }>;
  };
}

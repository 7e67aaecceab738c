import type { V1ConfigMap, V1Deployment, V1EnvVar, V1Service } from '@kubernetes/client-node';
import {
  DISCOVERY_PORT,
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
      expect.stringMatching(/in memory per replica.*Leader election stays on/s),
    ],
    [
      'starts the new Pod before stopping the old one on a rollout',
      () => deployment.spec!.strategy!.rollingUpdate,
      { maxSurge: 1, maxUnavailable: 0 },
    ],
    ['runs the image built by the Dockerfile', () => container.image, 'proxy-operator:dev'],
    ['uses the image already on the node (kind load)', () => container.imagePullPolicy, 'IfNotPresent'],
    ['runs as the operator ServiceAccount', () => pod.serviceAccountName, SERVICE_ACCOUNT_NAME],
    ['mounts the ServiceAccount token', () => pod.automountServiceAccountToken, true],
    [
      'reads the mounted providers config',
      () => container.args,
      ['--providers-config=/etc/proxy-operator/providers.yaml'],
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
      'exposes the metrics and discovery ports',
      () => container.ports,
      [
        { name: 'metrics', containerPort: METRICS_PORT },
        { name: 'discovery', containerPort: DISCOVERY_PORT },
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
      'reads the discovery token from an optional Secret',
      () => env('DISCOVERY_TOKEN').valueFrom,
      { secretKeyRef: { name: 'proxy-operator-discovery-token', key: 'token', optional: true } },
    ],
  ])('%s', (_what, actual, expected) => {
    expect(actual()).toEqual(expected);
  });

  it.each<[string, string, Record<string, unknown>]>([
    ['the providers ConfigMap', '/etc/proxy-operator', { configMap: { name: PROVIDERS_CONFIGMAP_NAME } }],
    ['a writable emptyDir (the root filesystem is read-only)', '/tmp', { emptyDir: {} }],
    ['the plugins emptyDir an init container fills', PLUGINS_DIR, { emptyDir: {} }],
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
    const settings = parseSettings(container.args ?? [], { POD_NAMESPACE: OPERATOR_NAMESPACE });
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
});

describe('the operator chart', () => {
  const kinds = (o: Manifest) => `${o.kind}/${o.metadata.name}`;

  it('creates its own namespace and the kubernetes provider namespace, before anything else', () => {
    expect(operator.slice(0, 2).map(kinds)).toEqual([
      `Namespace/${OPERATOR_NAMESPACE}`,
      `Namespace/${PROXIES_NAMESPACE}`,
    ]);
  });

  it('puts every namespaced object in the operator namespace, or in the provider namespace for its Role', () => {
    const cluster = ['Namespace', 'ClusterRole', 'ClusterRoleBinding'];
    for (const o of operator.filter((x) => !cluster.includes(x.kind))) {
      expect([kinds(o), o.metadata.namespace]).toEqual([
        kinds(o),
        ['Role', 'RoleBinding'].includes(o.kind)
          ? expect.stringMatching(/^proxy-operator-(system|proxies)$/)
          : OPERATOR_NAMESPACE,
      ]);
    }
    for (const o of operator.filter((x) => cluster.includes(x.kind)))
      expect(o.metadata.namespace).toBeUndefined();
  });
});

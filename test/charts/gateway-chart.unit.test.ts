import type { V1Deployment, V1Service } from '@kubernetes/client-node';

/** The manifest's own field names (the client's type calls `from` `_from`). */
interface NetworkPolicy {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: Array<{
      from?: Array<{ namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: unknown }>;
      ports: Array<{ protocol: string; port: string | number }>;
    }>;
  };
}
import {
  GATEWAY_CLIENT_LABEL,
  GATEWAY_CLIENT_LABEL_VALUE,
  GATEWAY_DRAIN_SECONDS,
  GATEWAY_REPLICAS,
} from '../../charts/gateway-chart.js';
import {
  GATEWAY_NAME,
  GATEWAY_PORT,
  GATEWAY_SERVICE_ACCOUNT_NAME,
  METRICS_PORT,
  METRICS_SERVICE_NAME,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
} from '../../charts/names.js';
import { PRE_STOP_SECONDS, TERMINATION_GRACE_SECONDS } from '../../charts/operator-chart.js';
import { parseSettings } from '../../cmd/settings.js';
import { DEFAULT_SHUTDOWN_GRACE_SECONDS, shutdownBudgetSeconds } from '../../framework/core/shutdown.js';
import { chartObjects, find, type Manifest } from './manifests.js';

// Issue 46 item 4: the gateway in both shipped topologies. With the memory store it runs in
// the operator's one Pod (it must share that Pod's book); with Redis it is a Deployment of its
// own, scaled out over the shared book, under an account with no Kubernetes writes. In both,
// its port is reachable only from labelled client namespaces, and its metrics are scraped.
const charts = chartObjects();
const TOPOLOGIES = [
  ['operator', OPERATOR_NAME],
  ['operator-redis', GATEWAY_NAME],
] as const;

const deploymentIn = (chart: string, name: string) =>
  find(charts.get(chart)!, 'Deployment', name, OPERATOR_NAMESPACE) as unknown as V1Deployment;
const serviceIn = (chart: string, name: string) =>
  find(charts.get(chart)!, 'Service', name, OPERATOR_NAMESPACE) as unknown as V1Service;
const policyIn = (chart: string) =>
  find(charts.get(chart)!, 'NetworkPolicy', GATEWAY_NAME, OPERATOR_NAMESPACE) as unknown as NetworkPolicy;
const podLabels = (d: V1Deployment) => d.spec!.template.metadata!.labels!;
const selects = (selector: Record<string, string>, d: V1Deployment) =>
  Object.entries(selector).every(([k, v]) => podLabels(d)[k] === v);
const deploymentsOf = (chart: string) =>
  charts.get(chart)!.filter((o) => o.kind === 'Deployment') as unknown as V1Deployment[];
const settingsOf = (d: V1Deployment) => {
  const c = d.spec!.template.spec!.containers[0];
  const env = Object.fromEntries(
    (c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]),
  );
  const s = parseSettings(c.args ?? [], { ...env, POD_NAMESPACE: OPERATOR_NAMESPACE, REDIS_PASSWORD: 'x' });
  if (s === 'help') throw new Error('asks for --help');
  return s;
};
/** The policy's rules as "port <- who", who being "anyone" or the namespace labels required. */
const admits = (policy: NetworkPolicy) =>
  policy.spec.ingress!.flatMap((rule) =>
    rule.ports.map(
      (p) =>
        `${String(p.port)} <- ${
          rule.from === undefined
            ? 'anyone'
            : JSON.stringify(rule.from.map((f) => [f.namespaceSelector?.matchLabels, f.podSelector]))
        }`,
    ),
  );
const labelledClients = JSON.stringify([[{ [GATEWAY_CLIENT_LABEL]: GATEWAY_CLIENT_LABEL_VALUE }, undefined]]);

describe.each(TOPOLOGIES)('the gateway in %s (Deployment %s)', (chart, deploymentName) => {
  const gateway = deploymentIn(chart, deploymentName);
  const container = gateway.spec!.template.spec!.containers[0];

  it('runs the gateway component on the port its Service and policy name', () => {
    const s = settingsOf(gateway);
    expect(s.components).toContain('gateway');
    expect(s.gateway.port).toBe(GATEWAY_PORT);
    expect(container.ports).toContainEqual({ name: 'gateway', containerPort: GATEWAY_PORT });
  });

  it('is reached through its Service, which selects the gateway Pods only, with client affinity', () => {
    const service = serviceIn(chart, GATEWAY_NAME);
    expect(service.spec!.ports).toEqual([{ name: 'gateway', port: GATEWAY_PORT, targetPort: 'gateway' }]);
    expect(service.spec!.sessionAffinity).toBe('ClientIP');
    expect(deploymentsOf(chart).filter((d) => selects(service.spec!.selector!, d))).toEqual([gateway]);
  });

  it('admits the gateway port only from namespaces labelled as gateway clients; never restricts its egress', () => {
    const policy = policyIn(chart);
    expect(deploymentsOf(chart).filter((d) => selects(policy.spec.podSelector.matchLabels, d))).toEqual([
      gateway,
    ]);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const rules = admits(policy);
    // Its other ports are the operator's policy's (test/charts/operator-ingress.unit.test.ts).
    expect(rules).toEqual([`gateway <- ${labelledClients}`]);
    // Every port the policy names is a named port of the container.
    const names = container.ports!.map((p) => p.name);
    for (const rule of policy.spec.ingress!) for (const p of rule.ports) expect(names).toContain(p.port);
  });

  it('is scraped: the metrics Service selects its Pods, on the metrics port the container serves', () => {
    const metrics = serviceIn(chart, METRICS_SERVICE_NAME);
    expect(selects(metrics.spec!.selector!, gateway)).toBe(true);
    expect(container.ports).toContainEqual({ name: 'metrics', containerPort: METRICS_PORT });
    expect(settingsOf(gateway).metrics.port).toBe(METRICS_PORT);
  });

  it('meets the restricted Pod Security profile like every other Deployment', () => {
    expect(container.securityContext).toEqual(
      expect.objectContaining({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        privileged: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      }),
    );
  });

  it('drains tunnels within the grace period: the drain fits the framework grace, the whole stop fits the Pod', () => {
    const s = settingsOf(gateway);
    expect(s.gateway.drainSeconds).toBeLessThanOrEqual(DEFAULT_SHUTDOWN_GRACE_SECONDS);
    const preStop = Number(container.lifecycle?.preStop?.exec?.command?.[1] ?? 0);
    expect(gateway.spec!.template.spec!.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(
      preStop + shutdownBudgetSeconds(DEFAULT_SHUTDOWN_GRACE_SECONDS) + 5,
    );
  });

  it('authenticates clients: the Pod mounts the discovery tokens Secret (no flag turns auth off)', () => {
    expect(container.env).toContainEqual({
      name: 'DISCOVERY_TOKENS_FILE',
      value: '/etc/proxy-operator-tokens/tokens',
    });
    expect(container.args!.join(' ')).not.toMatch(/unauthenticated/);
  });
});

describe('the gateway with the memory store (dist/operator.yaml)', () => {
  it('runs in the one operator Pod beside the discovery API and the controller: one book', () => {
    expect(settingsOf(deploymentIn('operator', OPERATOR_NAME)).components).toEqual([
      'controller',
      'discovery',
      'gateway',
    ]);
    expect(deploymentsOf('operator')).toHaveLength(1);
    expect(charts.get('operator')!.filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
  });
});

describe('the gateway with the Redis store (dist/operator-redis.yaml)', () => {
  const gateway = deploymentIn('operator-redis', GATEWAY_NAME);
  const container = gateway.spec!.template.spec!.containers[0];

  it.each<[string, () => unknown, unknown]>([
    ['runs the gateway only', () => settingsOf(gateway).components, ['gateway']],
    [
      'shares the book in the Redis the other Deployments use',
      () => settingsOf(gateway).leaseStore,
      settingsOf(deploymentIn('operator-redis', OPERATOR_NAME)).leaseStore,
    ],
    ['runs several replicas', () => gateway.spec!.replicas, GATEWAY_REPLICAS],
    [
      'rolls out a new Pod before stopping an old one',
      () => gateway.spec!.strategy,
      { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
    ],
    [
      'keeps serving while endpoints drain, then drains its tunnels',
      () => [container.lifecycle, settingsOf(gateway).gateway.drainSeconds],
      [{ preStop: { exec: { command: ['sleep', String(PRE_STOP_SECONDS)] } } }, GATEWAY_DRAIN_SECONDS],
    ],
    [
      'has a grace period for the pause and the graceful stop',
      () => gateway.spec!.template.spec!.terminationGracePeriodSeconds,
      TERMINATION_GRACE_SECONDS + PRE_STOP_SECONDS,
    ],
    [
      'runs under its own ServiceAccount',
      () => gateway.spec!.template.spec!.serviceAccountName,
      GATEWAY_SERVICE_ACCOUNT_NAME,
    ],
    [
      'reads REDIS_PASSWORD from the required Secret',
      () => container.env!.find((e) => e.name === 'REDIS_PASSWORD')!.valueFrom,
      { secretKeyRef: { name: 'proxy-operator-redis', key: 'password', optional: false } },
    ],
    [
      'serves no discovery API port',
      () => container.ports!.map((p) => p.containerPort),
      [METRICS_PORT, GATEWAY_PORT],
    ],
  ])('%s', (_what, actual, expected) => {
    expect(actual()).toEqual(expected);
  });

  it.each([
    ['network-policy', 'squid-ingress', 'the Squid Pods (its upstreams)'],
    ['redis-sample', 'proxy-operator-redis', 'the sample Redis (its book)'],
  ])('is admitted by the %s NetworkPolicy %s: it reaches %s', (policyChart, name, _what) => {
    const policy = charts
      .get(policyChart)!
      .find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === name) as unknown as NetworkPolicy;
    expect(policy).toBeDefined();
    const peers = policy.spec.ingress.flatMap((rule) => rule.from ?? []);
    expect(
      peers.some(
        (peer) =>
          peer.podSelector !== undefined &&
          Object.entries((peer.podSelector as { matchLabels: Record<string, string> }).matchLabels).every(
            ([k, v]) => podLabels(gateway)[k] === v,
          ) &&
          (peer.namespaceSelector === undefined ||
            peer.namespaceSelector.matchLabels?.['kubernetes.io/metadata.name'] === OPERATOR_NAMESPACE),
      ),
    ).toBe(true);
  });

  it('keeps one gateway Pod through voluntary disruptions, and the PDB selects the gateway Pods only', () => {
    const pdb = find(
      charts.get('operator-redis')!,
      'PodDisruptionBudget',
      GATEWAY_NAME,
      OPERATOR_NAMESPACE,
    ) as {
      spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
    } & Manifest;
    expect(pdb.spec.minAvailable).toBe(1);
    expect(deploymentsOf('operator-redis').filter((d) => selects(pdb.spec.selector.matchLabels, d))).toEqual([
      gateway,
    ]);
  });
});

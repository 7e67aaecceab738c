import {
  externalStep,
  managedStep,
  type HealthVerdict,
  type Inputs,
  type Observation,
} from '../../handlers/proxy-state-machine.js';
import { SPEC_HASH_ANNOTATION, type Proxy } from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';

function proxy(opts: { hash?: string; providerID?: string; reason?: string } = {}): Proxy {
  return {
    apiVersion: 'crawl.example.com/v1alpha1',
    kind: 'Proxy',
    metadata: {
      name: 'p',
      namespace: 'ns',
      uid: 'u-1',
      generation: 1,
      annotations: opts.hash ? { [SPEC_HASH_ANNOTATION]: opts.hash } : {},
    },
    spec: {
      mode: 'Managed',
      provider: 'mock',
      port: 3128,
      maxLeases: 5,
      healthCheck: {
        probeURL: 'http://127.0.0.1/x',
        intervalSeconds: 30,
        timeoutSeconds: 5,
        failureThreshold: 3,
        successThreshold: 1,
        expectedStatusCodes: [204],
      },
    },
    status: {
      providerID: opts.providerID,
      conditions: opts.reason
        ? [{ type: 'Provisioned', status: 'False', reason: opts.reason, message: '', lastTransitionTime: '' }]
        : [],
    },
  };
}

const instance = (state: Instance['state'], ip = '10.0.0.7'): Observation => ({
  kind: 'found',
  instance: {
    id: 'i-1',
    ip,
    state,
    uid: 'u-1',
    owner: 'o',
    namespace: 'ns',
    revision: '',
    createdAt: new Date(0),
  },
});
const healthy: HealthVerdict = {
  healthy: true,
  latencyMillis: 12,
  reason: 'ProbeSucceeded',
  message: 'ok',
  checkedAt: new Date(0),
};
const sick: HealthVerdict = { ...healthy, healthy: false, reason: 'ProxyTimeout' };

describe('the Managed state machine derives one action from spec, status and the provider', () => {
  const cases: Array<
    [
      string,
      Omit<Inputs, 'proxy'> & { proxy: Proxy },
      { action: string; phase: string; reason: string; requeue: boolean },
    ]
  > = [
    [
      'an unprovisioned proxy is created',
      { proxy: proxy(), desiredHash: 'h1', observation: { kind: 'unprovisioned' } },
      { action: 'create', phase: 'Provisioning', reason: 'Creating', requeue: true },
    ],
    [
      'an unresolvable cloud-init blocks creation',
      {
        proxy: proxy(),
        desiredHash: undefined,
        cloudInitError: 'no secret',
        observation: { kind: 'unprovisioned' },
      },
      { action: 'none', phase: 'Pending', reason: 'CloudInitError', requeue: true },
    ],
    [
      'a provisioning instance is polled',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Provisioning', ''),
      },
      { action: 'none', phase: 'Provisioning', reason: 'InstanceProvisioning', requeue: true },
    ],
    [
      'a running instance without a verdict is not Ready yet',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Running'),
      },
      { action: 'none', phase: 'Provisioning', reason: 'InstanceRunning', requeue: false },
    ],
    [
      'a running instance with a healthy verdict is Ready',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Running'),
        verdict: healthy,
      },
      { action: 'none', phase: 'Ready', reason: 'InstanceRunning', requeue: false },
    ],
    [
      'a running instance with an unhealthy verdict is Unhealthy',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Running'),
        verdict: sick,
      },
      { action: 'none', phase: 'Unhealthy', reason: 'InstanceRunning', requeue: false },
    ],
    [
      'a spec-hash mismatch deletes the instance (replacement)',
      {
        proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Running'),
      },
      { action: 'delete', phase: 'Provisioning', reason: 'Replacing', requeue: true },
    ],
    [
      'a terminated instance is replaced',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: instance('Terminated'),
      },
      { action: 'delete', phase: 'Provisioning', reason: 'Replacing', requeue: true },
    ],
    [
      'a deleted old instance is forgotten so a new one is created',
      {
        proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: { kind: 'not-found' },
      },
      { action: 'forget', phase: 'Provisioning', reason: 'Replacing', requeue: true },
    ],
    [
      'an instance that vanished is forgotten and re-created',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: 'h1',
        observation: { kind: 'not-found' },
      },
      { action: 'forget', phase: 'Provisioning', reason: 'InstanceGone', requeue: true },
    ],
    [
      'a lost Secret on a running proxy never replaces it',
      {
        proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
        desiredHash: undefined,
        cloudInitError: 'gone',
        observation: instance('Running'),
        verdict: healthy,
      },
      { action: 'none', phase: 'Ready', reason: 'CloudInitError', requeue: false },
    ],
  ];

  it.each(cases)('%s', (_name, inputs, want) => {
    const step = managedStep(inputs);
    expect(step.action.type).toBe(want.action);
    expect(step.status.phase).toBe(want.phase);
    expect(step.status.provisioned.reason).toBe(want.reason);
    expect(step.requeueAfter !== undefined).toBe(want.requeue);
  });

  it('records the spec hash before creating, only when it differs', () => {
    expect(
      managedStep({ proxy: proxy(), desiredHash: 'h1', observation: { kind: 'unprovisioned' } }).annotateHash,
    ).toBe('h1');
    expect(
      managedStep({ proxy: proxy({ hash: 'h1' }), desiredHash: 'h1', observation: { kind: 'unprovisioned' } })
        .annotateHash,
    ).toBeUndefined();
  });

  it('warns loudly, once, that a replacement changes the IP', () => {
    const first = managedStep({
      proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
      desiredHash: 'h1',
      observation: instance('Running'),
    });
    expect(first.event).toMatchObject({ type: 'Warning', reason: 'Replacing' });
    expect(first.event?.message).toMatch(/IP WILL CHANGE/);
    const again = managedStep({
      proxy: proxy({ hash: 'h0', providerID: 'i-1', reason: 'Replacing' }),
      desiredHash: 'h1',
      observation: instance('Running'),
    });
    expect(again.event).toBeUndefined();
  });
});

describe('External proxies follow their health verdicts', () => {
  const ext = (): Proxy => {
    const p = proxy();
    p.spec = {
      ...p.spec,
      mode: 'External',
      provider: undefined,
      endpoint: { host: '127.0.0.9', port: 8080 },
    };
    return p;
  };
  it.each([
    ['no verdict yet keeps it Pending', undefined, 'Pending', 'Unknown'],
    ['passing probes make it Ready', healthy, 'Ready', 'True'],
    ['failing probes make it Unhealthy', sick, 'Unhealthy', 'False'],
  ] as const)('%s', (_n, verdict, phase, healthStatus) => {
    const step = externalStep(ext(), verdict);
    expect(step.action.type).toBe('none');
    expect(step.status.phase).toBe(phase);
    expect(step.status.healthy.status).toBe(healthStatus);
    expect(step.status.ip).toBe('127.0.0.9');
  });
});

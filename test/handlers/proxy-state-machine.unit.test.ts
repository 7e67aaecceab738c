import {
  deletionNeedsInventory,
  deletionStep,
  externalStep,
  needsInventory,
  providerErrorStep,
  replacementPendingStep,
  unknownProviderStep,
  wantsDriftCheck,
  type HealthVerdict,
  type Observation,
  type ProviderFailure,
  type Step,
} from '../../handlers/proxy-state-machine.js';
import { decide, type CaseInputs } from './decide.js';
import {
  CONDITION_HEALTHY,
  CONDITION_PROVISIONED,
  SPEC_HASH_ANNOTATION,
  type Condition,
  type Proxy,
  type ProxyPhase,
} from '../../crds/proxy-types.js';
import type { Instance } from '../../providers/contract.js';
import { stateMachineInstance, stateMachineProxy } from './state-machine-proxy.js';

interface Stored {
  hash?: string;
  providerID?: string;
  reason?: string;
  phase?: ProxyPhase;
  ip?: string;
  healthy?: Pick<Condition, 'status' | 'reason' | 'message'>;
  latencyMillis?: number;
  generation?: number;
  observedGeneration?: number;
}

function proxy(opts: Stored = {}): Proxy {
  const conditions: Condition[] = [];
  if (opts.reason)
    conditions.push({
      type: CONDITION_PROVISIONED,
      status: 'False',
      reason: opts.reason,
      message: '',
      lastTransitionTime: '',
    });
  if (opts.healthy) conditions.push({ type: CONDITION_HEALTHY, ...opts.healthy, lastTransitionTime: '' });
  return stateMachineProxy({
    generation: opts.generation ?? 1,
    annotations: opts.hash ? { [SPEC_HASH_ANNOTATION]: opts.hash } : {},
    status: {
      providerID: opts.providerID,
      phase: opts.phase,
      ip: opts.ip,
      latencyMillis: opts.latencyMillis,
      observedGeneration: opts.observedGeneration ?? opts.generation ?? 1,
      conditions,
    },
  });
}

function inst(state: Instance['state'], ip = '10.0.0.7', extra: Partial<Instance> = {}): Instance {
  return stateMachineInstance(state, { ip, ...extra });
}
const found = (state: Instance['state'], ip = '10.0.0.7'): Observation => ({
  kind: 'found',
  instance: inst(state, ip),
});
const healthy: HealthVerdict = {
  healthy: true,
  latencyMillis: 12,
  reason: 'ProbeSucceeded',
  message: 'status 204',
  checkedAt: new Date(0),
};
const sick: HealthVerdict = {
  ...healthy,
  healthy: false,
  reason: 'ProxyTimeout',
  message: 'probe timed out',
};
const storedReady = { status: 'True', reason: 'ProbeSucceeded', message: 'status 204' } as const;
const storedSick = { status: 'False', reason: 'ConnectionRefused', message: 'refused' } as const;

const next = (s: Step) =>
  s.next.kind === 'requeue'
    ? `requeue ${s.next.seconds}`
    : s.next.kind === 'permanent'
      ? 'permanent'
      : s.next.kind;

describe('the Managed state machine derives one action from spec, status and the provider', () => {
  const cases: Array<[string, CaseInputs, { action: string; phase: string; reason: string; next: string }]> =
    [
      [
        'an unprovisioned proxy is created',
        { proxy: proxy(), desiredHash: 'h1', observation: { kind: 'unprovisioned' } },
        { action: 'create', phase: 'Provisioning', reason: 'Creating', next: 'requeue 5' },
      ],
      [
        'an unresolvable cloud-init blocks creation',
        {
          proxy: proxy(),
          desiredHash: undefined,
          cloudInitError: 'no secret',
          observation: { kind: 'unprovisioned' },
        },
        { action: 'none', phase: 'Pending', reason: 'CloudInitError', next: 'requeue 60' },
      ],
      [
        'a provisioning instance is polled',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: found('Provisioning', ''),
        },
        { action: 'none', phase: 'Provisioning', reason: 'InstanceProvisioning', next: 'requeue 5' },
      ],
      [
        'a running instance without a verdict is not Ready yet',
        { proxy: proxy({ hash: 'h1', providerID: 'i-1' }), desiredHash: 'h1', observation: found('Running') },
        { action: 'none', phase: 'Provisioning', reason: 'InstanceRunning', next: 'steady' },
      ],
      [
        'a running instance with a healthy verdict is Ready',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: found('Running'),
          verdict: healthy,
        },
        { action: 'none', phase: 'Ready', reason: 'InstanceRunning', next: 'steady' },
      ],
      [
        'a running instance with an unhealthy verdict is Unhealthy',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: found('Running'),
          verdict: sick,
        },
        { action: 'none', phase: 'Unhealthy', reason: 'InstanceRunning', next: 'steady' },
      ],
      [
        'a spec-hash mismatch deletes the instance (replacement)',
        { proxy: proxy({ hash: 'h0', providerID: 'i-1' }), desiredHash: 'h1', observation: found('Running') },
        { action: 'delete', phase: 'Provisioning', reason: 'Replacing', next: 'requeue 5' },
      ],
      [
        'a terminated instance is replaced',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: found('Terminated'),
        },
        { action: 'delete', phase: 'Provisioning', reason: 'Replacing', next: 'requeue 5' },
      ],
      [
        'a deleted old instance is forgotten so a new one is created',
        {
          proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: { kind: 'not-found' },
        },
        { action: 'forget', phase: 'Provisioning', reason: 'Replacing', next: 'requeue 1' },
      ],
      [
        'an instance that vanished is forgotten and re-created',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: 'h1',
          observation: { kind: 'not-found' },
        },
        { action: 'forget', phase: 'Provisioning', reason: 'InstanceGone', next: 'requeue 1' },
      ],
      [
        'a lost Secret on a running proxy never replaces it',
        {
          proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
          desiredHash: undefined,
          cloudInitError: 'gone',
          observation: found('Running'),
          verdict: healthy,
        },
        { action: 'none', phase: 'Ready', reason: 'CloudInitError', next: 'steady' },
      ],
    ];

  it.each(cases)('%s', (_name, inputs, want) => {
    const step = decide(inputs);
    expect(step.action.type).toBe(want.action);
    expect(step.status?.phase).toBe(want.phase);
    expect(step.status?.provisioned?.reason).toBe(want.reason);
    expect(next(step)).toBe(want.next);
  });

  it('records the spec hash before creating, only when it differs', () => {
    expect(
      decide({ proxy: proxy(), desiredHash: 'h1', observation: { kind: 'unprovisioned' } }).annotateHash,
    ).toBe('h1');
    expect(
      decide({ proxy: proxy({ hash: 'h1' }), desiredHash: 'h1', observation: { kind: 'unprovisioned' } })
        .annotateHash,
    ).toBeUndefined();
  });

  it('warns loudly, once, that a replacement changes the IP', () => {
    const first = decide({
      proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
      desiredHash: 'h1',
      observation: found('Running'),
    });
    expect(first.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'Replacing' })]);
    expect(first.events[0].message).toMatch(/IP WILL CHANGE/);
    const again = decide({
      proxy: proxy({ hash: 'h0', providerID: 'i-1', reason: 'Replacing' }),
      desiredHash: 'h1',
      observation: found('Running'),
    });
    expect(again.events).toEqual([]);
  });

  it.each([
    [
      'Ready',
      { ip: '10.0.0.7', phase: 'Ready' as const, healthy: storedReady },
      'Provisioning',
      'AwaitingProbe',
    ],
    [
      'Unhealthy',
      { ip: '10.0.0.7', phase: 'Unhealthy' as const, healthy: storedSick },
      'Provisioning',
      'AwaitingProbe',
    ],
  ])(
    'a %s proxy being replaced is Provisioning with no verdict (its IP will change)',
    (_n, stored, phase, reason) => {
      const step = decide({
        proxy: proxy({ hash: 'h0', providerID: 'i-1', ...stored }),
        desiredHash: 'h1',
        observation: found('Running'),
      });
      expect(step.status).toMatchObject({ phase, healthy: { reason } });
    },
  );

  it('posts a Ready Event when the phase becomes Ready, and none while it stays Ready', () => {
    const first = decide({
      proxy: proxy({ hash: 'h1', providerID: 'i-1', ip: '10.0.0.7', phase: 'Provisioning' }),
      desiredHash: 'h1',
      observation: found('Running'),
      verdict: healthy,
    });
    expect(first.events.map((e) => e.reason)).toEqual(['Provisioned', 'Ready']);
    const steady = decide({
      proxy: proxy({
        hash: 'h1',
        providerID: 'i-1',
        ip: '10.0.0.7',
        phase: 'Ready',
        reason: 'InstanceRunning',
        healthy: storedReady,
        latencyMillis: 12,
      }),
      desiredHash: 'h1',
      observation: found('Running'),
      verdict: healthy,
    });
    expect(steady.events).toEqual([]);
  });
});

describe("an instance that is not starting says why, in the provider's words", () => {
  const detail = 'ImagePullBackOff: Back-off pulling image "ubuntu/squid:6.6-24.04_beta"';
  const stuck: Observation = { kind: 'found', instance: inst('Provisioning', '', { detail }) };

  it('shows the reason in the Provisioned condition instead of "starting", and warns once', () => {
    const first = decide({
      proxy: proxy({ hash: 'h1', providerID: 'i-1' }),
      desiredHash: 'h1',
      observation: stuck,
    });
    expect(first.status?.provisioned).toEqual({
      status: 'False',
      reason: 'InstanceNotStarting',
      message: `instance i-1 is not starting: ${detail}`,
    });
    expect(first.events).toEqual([
      { type: 'Warning', reason: 'InstanceNotStarting', message: `instance i-1 is not starting: ${detail}` },
    ]);
    expect(first.logs).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ level: 'warn', message: 'instance is not starting' }),
      ]),
    );
    expect(next(first)).toBe('requeue 5');
    const again = decide({
      proxy: proxy({ hash: 'h1', providerID: 'i-1', reason: 'InstanceNotStarting' }),
      desiredHash: 'h1',
      observation: stuck,
    });
    expect(again.events).toEqual([]);
    expect(again.logs.filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('a provider giving up on a start (a Pod past its start bound) replaces the instance, saying why', () => {
    const step = decide({
      proxy: proxy({ hash: 'h1', providerID: 'i-1', reason: 'InstanceNotStarting' }),
      desiredHash: 'h1',
      observation: {
        kind: 'found',
        instance: inst('Terminated', '', { detail: `not started within 300 s of its creation (${detail})` }),
      },
    });
    expect(step.action).toEqual({ type: 'delete', providerIDs: ['i-1'] });
    expect(step.status?.provisioned?.message).toContain(
      `instance is terminated (not started within 300 s of its creation (${detail}))`,
    );
  });
});

describe('a restart or a new leader (no verdict in memory) carries the stored health forward while the address is unchanged', () => {
  const running = (stored: Stored) => ({
    proxy: proxy({ hash: 'h1', providerID: 'i-1', reason: 'InstanceRunning', ...stored }),
    desiredHash: 'h1',
  });
  const cases: Array<
    [string, CaseInputs, { phase: ProxyPhase; healthy: string; reason: string; writesLatency: boolean }]
  > = [
    [
      'a Ready proxy stays Ready with its stored Healthy condition',
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 12 }),
        observation: found('Running'),
      },
      { phase: 'Ready', healthy: 'True', reason: 'ProbeSucceeded', writesLatency: false },
    ],
    [
      'an Unhealthy proxy stays Unhealthy',
      {
        ...running({ ip: '10.0.0.7', phase: 'Unhealthy', healthy: storedSick }),
        observation: found('Running'),
      },
      { phase: 'Unhealthy', healthy: 'False', reason: 'ConnectionRefused', writesLatency: false },
    ],
    [
      'a changed address resets to Provisioning and AwaitingProbe',
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 12 }),
        observation: found('Running', '10.0.0.8'),
      },
      { phase: 'Provisioning', healthy: 'Unknown', reason: 'AwaitingProbe', writesLatency: false },
    ],
    [
      'a stored AwaitingProbe is not a verdict',
      {
        ...running({
          ip: '10.0.0.7',
          phase: 'Provisioning',
          healthy: { status: 'Unknown', reason: 'AwaitingProbe', message: '' },
        }),
        observation: found('Running'),
      },
      { phase: 'Provisioning', healthy: 'Unknown', reason: 'AwaitingProbe', writesLatency: false },
    ],
    [
      'a reason this version does not know is not carried',
      {
        ...running({
          ip: '10.0.0.7',
          phase: 'Ready',
          healthy: { status: 'True', reason: 'Whatever', message: '' },
        }),
        observation: found('Running'),
      },
      { phase: 'Provisioning', healthy: 'Unknown', reason: 'AwaitingProbe', writesLatency: false },
    ],
    [
      "the new engine's first verdict agreeing with status (latency within the band) keeps the stored values",
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 40 }),
        observation: found('Running'),
        verdict: { ...healthy, latencyMillis: 90, message: 'status 204' },
      },
      { phase: 'Ready', healthy: 'True', reason: 'ProbeSucceeded', writesLatency: false },
    ],
    [
      'a verdict whose latency left the band is written',
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 40 }),
        observation: found('Running'),
        verdict: { ...healthy, latencyMillis: 400 },
      },
      { phase: 'Ready', healthy: 'True', reason: 'ProbeSucceeded', writesLatency: true },
    ],
    [
      "the new engine's first verdict agreeing with status keeps the stored values, whatever one probe's latency",
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 40 }),
        observation: found('Running'),
        verdict: { ...healthy, latencyMillis: 400, first: true },
      },
      { phase: 'Ready', healthy: 'True', reason: 'ProbeSucceeded', writesLatency: false },
    ],
    [
      'a first verdict that disagrees is written',
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 40 }),
        observation: found('Running'),
        verdict: { ...sick, first: true },
      },
      { phase: 'Unhealthy', healthy: 'False', reason: 'ProxyTimeout', writesLatency: true },
    ],
    [
      'a verdict that disagrees is written',
      {
        ...running({ ip: '10.0.0.7', phase: 'Ready', healthy: storedReady, latencyMillis: 12 }),
        observation: found('Running'),
        verdict: sick,
      },
      { phase: 'Unhealthy', healthy: 'False', reason: 'ProxyTimeout', writesLatency: true },
    ],
    [
      'an unhealthy verdict with a new reason is written',
      {
        ...running({ ip: '10.0.0.7', phase: 'Unhealthy', healthy: storedSick }),
        observation: found('Running'),
        verdict: sick,
      },
      { phase: 'Unhealthy', healthy: 'False', reason: 'ProxyTimeout', writesLatency: true },
    ],
  ];

  it.each(cases)('%s', (_name, inputs, want) => {
    const step = decide(inputs);
    expect(step.status?.phase).toBe(want.phase);
    expect(step.status?.healthy).toMatchObject({ status: want.healthy, reason: want.reason });
    expect(step.status?.latencyMillis !== undefined).toBe(want.writesLatency);
    expect(step.events.filter((e) => e.reason === 'Ready' || e.reason === 'Unhealthy')).toEqual(
      want.phase === inputs.proxy.status?.phase || want.phase === 'Provisioning' ? [] : [expect.anything()],
    );
  });

  const ext = (stored: Stored & { host?: string }): Proxy => {
    const p = proxy(stored);
    p.spec = {
      ...p.spec,
      mode: 'External',
      provider: undefined,
      endpoint: { host: stored.host ?? '127.0.0.9', port: 8080 },
    };
    return p;
  };
  it.each([
    [
      'carries a stored Ready forward',
      ext({ ip: '127.0.0.9', phase: 'Ready', healthy: storedReady }),
      'Ready',
      'True',
    ],
    [
      'resets when the host changed',
      ext({ ip: '127.0.0.8', phase: 'Ready', healthy: storedReady }),
      'Pending',
      'Unknown',
    ],
    [
      'resets when the spec changed since the verdict was written (the port may have moved)',
      ext({ ip: '127.0.0.9', phase: 'Ready', healthy: storedReady, generation: 2, observedGeneration: 1 }),
      'Pending',
      'Unknown',
    ],
  ] as const)('an External proxy %s', (_n, p, phase, status) => {
    const step = externalStep(p, undefined);
    expect(step.status).toMatchObject({ phase, healthy: { status } });
    expect(step.events).toEqual([]);
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
    ['no verdict yet keeps it Pending', undefined, 'Pending', 'Unknown', []],
    ['passing probes make it Ready', healthy, 'Ready', 'True', ['Ready']],
    ['failing probes make it Unhealthy', sick, 'Unhealthy', 'False', ['Unhealthy']],
    [
      'a target that cannot be probed makes it Unhealthy with one InvalidProbeTarget Warning',
      { ...sick, reason: 'InvalidProbeTarget', message: 'the proxy address is not usable' },
      'Unhealthy',
      'False',
      ['InvalidProbeTarget'],
    ],
  ] as const)('%s', (_n, verdict, phase, healthStatus, events) => {
    const step = externalStep(ext(), verdict);
    expect(step.action.type).toBe('none');
    expect(step.status?.phase).toBe(phase);
    expect(step.status?.healthy?.status).toBe(healthStatus);
    expect(step.status?.ip).toBe('127.0.0.9');
    expect(step.events.map((e) => e.reason)).toEqual(events);
  });
});

describe('provider errors: only a hopeless create fails a proxy', () => {
  const failure = (
    operation: ProviderFailure['operation'],
    kind: ProviderFailure['kind'],
  ): ProviderFailure => ({
    provider: 'gcp-eu',
    operation,
    kind,
    message: `${kind} from ${operation}`,
  });
  const ready = proxy({
    hash: 'h1',
    providerID: 'i-1',
    ip: '10.0.0.7',
    phase: 'Ready',
    healthy: storedReady,
  });
  const cases: Array<
    [
      string,
      ProviderFailure,
      Proxy,
      boolean,
      { phase: ProxyPhase; reason: string; next: string; event: string },
    ]
  > = [
    [
      'a 403 from get on a running instance keeps it Ready and backs off',
      failure('get', 'Permanent'),
      ready,
      false,
      { phase: 'Ready', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a timeout from get keeps the phase and backs off',
      failure('get', 'Transient'),
      ready,
      false,
      { phase: 'Ready', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a quota answer from get is no quota wait: it backs off',
      failure('get', 'QuotaExceeded'),
      ready,
      false,
      { phase: 'Ready', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a not-ready cloud (400) while provisioning keeps Provisioning',
      failure('get', 'Permanent'),
      proxy({ hash: 'h1', providerID: 'i-1', phase: 'Provisioning' }),
      false,
      { phase: 'Provisioning', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a delete failure during replacement is never Permanent',
      failure('delete', 'Permanent'),
      ready,
      false,
      { phase: 'Ready', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a list failure while looking for stale revisions backs off',
      failure('listByTag', 'Permanent'),
      proxy({ hash: 'h0' }),
      false,
      { phase: 'Pending', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a quota refusal of a create waits 300 s',
      failure('create', 'QuotaExceeded'),
      proxy(),
      false,
      { phase: 'Pending', reason: 'QuotaExceeded', next: 'requeue 300', event: 'QuotaExceeded' },
    ],
    [
      'a transient create failure backs off',
      failure('create', 'Transient'),
      proxy(),
      false,
      { phase: 'Pending', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
    [
      'a create the provider calls hopeless fails the proxy permanently',
      failure('create', 'Permanent'),
      proxy(),
      false,
      { phase: 'Failed', reason: 'ProvisioningFailed', next: 'permanent', event: 'ProvisioningFailed' },
    ],
    [
      'any failure while deleting keeps Deleting and backs off',
      failure('delete', 'Permanent'),
      proxy({ hash: 'h1', providerID: 'i-1', phase: 'Deleting' }),
      true,
      { phase: 'Deleting', reason: 'ProviderError', next: 'backoff', event: 'ProviderError' },
    ],
  ];

  it.each(cases)('%s', (_name, f, p, deleting, want) => {
    const step = providerErrorStep({ proxy: p, failure: f, deleting });
    expect(step.status?.phase).toBe(want.phase);
    expect(step.status?.provisioned).toMatchObject({ status: 'False', reason: want.reason });
    expect(step.status?.provisioned?.message).toContain(f.message);
    expect(next(step)).toBe(want.next);
    expect(step.events.map((e) => e.reason)).toContain(want.event);
    expect(step.logs).toEqual(expect.arrayContaining([expect.objectContaining({ level: 'error' })]));
  });

  it('a running proxy under a provider error still follows its health verdicts', () => {
    const step = providerErrorStep({
      proxy: ready,
      failure: failure('get', 'Transient'),
      deleting: false,
      verdict: sick,
    });
    expect(step.status).toMatchObject({
      phase: 'Unhealthy',
      healthy: { status: 'False', reason: 'ProxyTimeout' },
    });
  });
});

describe('an unconfigured provider is a configuration mistake: nothing is lost, and it heals', () => {
  const cases: Array<[string, Proxy, boolean, { action: string; phase?: ProxyPhase; next: string }]> = [
    [
      'a new proxy waits in Pending, retrying slowly',
      proxy(),
      false,
      { action: 'none', phase: 'Pending', next: 'requeue 300' },
    ],
    [
      'a running proxy keeps serving',
      proxy({ hash: 'h1', providerID: 'i-1', ip: '10.0.0.7', phase: 'Ready', healthy: storedReady }),
      false,
      { action: 'none', phase: 'Ready', next: 'requeue 300' },
    ],
    [
      'deleting a proxy with an instance keeps the finalizer',
      proxy({ hash: 'h1', providerID: 'i-1', phase: 'Ready' }),
      true,
      { action: 'none', phase: 'Deleting', next: 'requeue 300' },
    ],
    [
      'deleting a proxy whose create may have happened keeps the finalizer',
      proxy({ hash: 'h1' }),
      true,
      { action: 'none', phase: 'Deleting', next: 'requeue 300' },
    ],
    [
      'deleting a proxy that never reached a provider releases it',
      proxy(),
      true,
      { action: 'release', next: 'steady' },
    ],
  ];

  it.each(cases)('%s', (_name, p, deleting, want) => {
    const step = unknownProviderStep({ proxy: p, configured: ['mock', 'gcp-eu'], deleting });
    expect(step.action.type).toBe(want.action);
    expect(step.status?.phase).toBe(want.phase);
    expect(next(step)).toBe(want.next);
    if (want.action === 'release') return;
    expect(step.status?.provisioned).toMatchObject({ status: 'False', reason: 'UnknownProvider' });
    expect(step.status?.provisioned?.message).toMatch(
      /provider "mock" is not configured \(configured: mock, gcp-eu\)/,
    );
    expect(step.events).toEqual([expect.objectContaining({ type: 'Warning', reason: 'UnknownProvider' })]);
    expect(step.logs).toEqual(expect.arrayContaining([expect.objectContaining({ level: 'error' })]));
  });

  it('tells a person how to release a held finalizer deliberately', () => {
    const step = unknownProviderStep({ proxy: proxy({ providerID: 'i-1' }), configured: [], deleting: true });
    expect(step.status?.provisioned?.message).toMatch(
      /instance i-1.*remove the finalizer \(README: Operations\)/,
    );
  });
});

describe('a crash between create and its record never leaves a second instance', () => {
  it.each([
    ['no annotation: nothing was ever created', proxy(), 'h1', false],
    ['annotation equals the desired revision: the create is idempotent', proxy({ hash: 'h1' }), 'h1', false],
    [
      'annotation names another revision: an unrecorded instance may exist',
      proxy({ hash: 'h0' }),
      'h1',
      true,
    ],
    ['a recorded instance: get answers', proxy({ hash: 'h0', providerID: 'i-1' }), 'h1', false],
    ['cloud-init unresolved: nothing will be created', proxy({ hash: 'h0' }), undefined, false],
  ] as const)('lists the provider when %s → %s', (_n, p, desired, want) => {
    expect(needsInventory(p, desired)).toBe(want);
  });

  it('deletes the instances of other revisions before creating the wanted one', () => {
    const step = decide({
      proxy: proxy({ hash: 'h0' }),
      desiredHash: 'h1',
      observation: {
        kind: 'unprovisioned',
        strays: [
          inst('Running', '', { id: 'old', revision: 'h0' }),
          inst('Provisioning', '', { id: 'new', revision: 'h1' }),
        ],
      },
    });
    expect(step.action).toEqual({ type: 'create', staleInstances: ['old'] });
    expect(step.annotateHash).toBe('h1');
    expect(step.events.map((e) => e.reason)).toEqual(['StaleInstances', 'Creating']);
  });

  it('records the next revision when forgetting a replaced instance, so a resumed run needs no list', () => {
    const step = decide({
      proxy: proxy({ hash: 'h0', providerID: 'i-1' }),
      desiredHash: 'h1',
      observation: { kind: 'not-found' },
    });
    expect(step.annotateHash).toBe('h1');
  });

  it.each([
    [
      'a recorded instance is deleted',
      proxy({ hash: 'h1', providerID: 'i-1' }),
      found('Running'),
      'delete',
      ['i-1'],
    ],
    [
      'a recorded instance that is gone releases',
      proxy({ hash: 'h1', providerID: 'i-1' }),
      { kind: 'not-found' },
      'release',
      [],
    ],
    [
      'unrecorded instances of the Proxy are deleted',
      proxy({ hash: 'h1' }),
      { kind: 'unprovisioned', strays: [inst('Running', '', { id: 'x' })] },
      'delete',
      ['x'],
    ],
    [
      'nothing to delete releases',
      proxy({ hash: 'h1' }),
      { kind: 'unprovisioned', strays: [] },
      'release',
      [],
    ],
  ] as const)('deletion: %s', (_n, p, observation, action, ids) => {
    const step = deletionStep(p, observation as Observation);
    expect(step.action.type).toBe(action);
    if (step.action.type === 'delete') {
      expect(step.action.providerIDs).toEqual(ids);
      expect(step.status?.phase).toBe('Deleting');
      expect(next(step)).toBe('requeue 2');
    }
  });

  it.each([
    ['with an annotation and no providerID', proxy({ hash: 'h1' }), true],
    ['with a providerID', proxy({ hash: 'h1', providerID: 'i-1' }), false],
    ['never created', proxy(), false],
  ])('deletion lists the provider %s: %s', (_n, p, want) => {
    expect(deletionNeedsInventory(p)).toBe(want);
  });
});

describe('replacement of a serving proxy is paced (--max-unavailable)', () => {
  it.each([
    [
      'a Ready proxy whose spec changed',
      proxy({ hash: 'h0', providerID: 'i-1', phase: 'Ready' }),
      found('Running'),
      'rollout',
    ],
    [
      'an Unhealthy proxy whose spec changed',
      proxy({ hash: 'h0', providerID: 'i-1', phase: 'Unhealthy' }),
      found('Running'),
      undefined,
    ],
    [
      'a Ready proxy whose instance died',
      proxy({ hash: 'h1', providerID: 'i-1', phase: 'Ready' }),
      found('Terminated'),
      undefined,
    ],
  ])('%s needs a slot: %s', (_n, p, observation, want) => {
    const step = decide({ proxy: p, desiredHash: 'h1', observation });
    expect(step.action.type).toBe('delete');
    expect(step.needsSlot).toBe(want);
  });

  it('without a slot the proxy keeps serving and says why it waits', () => {
    const p = proxy({
      hash: 'h0',
      providerID: 'i-1',
      ip: '10.0.0.7',
      phase: 'Ready',
      healthy: storedReady,
      latencyMillis: 12,
    });
    const step = replacementPendingStep(
      { proxy: p, desiredHash: 'h1', observation: { kind: 'found', instance: inst('Running') } },
      { cap: 2, failed: [] },
    );
    expect(step.action.type).toBe('none');
    expect(step.status).toMatchObject({
      phase: 'Ready',
      providerID: 'i-1',
      provisioned: { reason: 'ReplacementPending' },
      healthy: { status: 'True' },
    });
    expect(step.status?.provisioned?.message).toMatch(
      /fewer than 2 of provider mock's proxies are out of service/,
    );
    expect(next(step)).toBe('requeue 5');
  });
});

describe('the drift timer looks only at steady running proxies', () => {
  it.each([
    ['a running Managed proxy', proxy({ providerID: 'i-1', reason: 'InstanceRunning' }), true],
    [
      'a Failed one (no retry behind the back of the permanent failure)',
      proxy({ reason: 'ProvisioningFailed' }),
      false,
    ],
    ['one waiting out a quota', proxy({ reason: 'QuotaExceeded' }), false],
    [
      'one waiting for a replacement slot (it polls on its own)',
      proxy({ reason: 'ReplacementPending' }),
      false,
    ],
  ])('%s → %s', (_n, p, want) => {
    expect(wantsDriftCheck(p)).toBe(want);
  });

  it('never an External proxy, nor one being deleted', () => {
    const ext = proxy({ reason: 'InstanceRunning' });
    ext.spec = { ...ext.spec, mode: 'External' };
    expect(wantsDriftCheck(ext)).toBe(false);
    const deleting = proxy({ reason: 'InstanceRunning' });
    deleting.metadata.deletionTimestamp = '2026-01-01T00:00:00Z';
    expect(wantsDriftCheck(deleting)).toBe(false);
  });
});

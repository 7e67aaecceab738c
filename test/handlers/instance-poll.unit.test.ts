import { deadInstanceHold } from '../../handlers/dead-instance-hold.js';
import { POLL_SECONDS, type SlotAsk, type Step } from '../../handlers/proxy-state-machine.js';
import type { InstanceState } from '../../providers/contract.js';
import { decide, type CaseInputs } from './decide.js';
import { NOW, readyStateMachineProxy, stateMachineInstance } from './state-machine-proxy.js';

// --instance-poll-interval: every step that waits on an instance being created or replaced, or
// on a --max-unavailable slot, looks again after Inputs.pollSeconds (the flag); without it,
// after POLL_SECONDS (5 s).

const ready = readyStateMachineProxy;
const found = (state: InstanceState) => ({ kind: 'found', instance: stateMachineInstance(state) }) as const;
const refused: SlotAsk = () => ({ granted: false, cap: 1, failed: [] });

const cases: Array<[string, CaseInputs, string]> = [
  [
    'an unprovisioned proxy is created',
    { proxy: ready('h1'), desiredHash: 'h1', observation: { kind: 'unprovisioned' } },
    'Creating',
  ],
  [
    'a provisioning instance is looked at again',
    {
      proxy: ready('h1'),
      desiredHash: 'h1',
      observation: { kind: 'found', instance: stateMachineInstance('Provisioning', { ip: '' }) },
    },
    'InstanceProvisioning',
  ],
  [
    'a spec change deletes the instance (replacement)',
    { proxy: ready('h0'), desiredHash: 'h1', observation: found('Running') },
    'Replacing',
  ],
  [
    'a spec change refused a slot waits for one',
    { proxy: ready('h0'), desiredHash: 'h1', observation: found('Running'), slot: refused },
    'ReplacementPending',
  ],
  [
    'an instance reported dead while the dead-instance hold holds',
    {
      proxy: ready('h1'),
      desiredHash: 'h1',
      observation: found('Stopped'),
      autopilot: { now: NOW, unhealthyAfterSeconds: 60 },
      deadHold: deadInstanceHold({
        provider: 'mock',
        namespace: 'crawl',
        share: { dead: 6, total: 8, team: { dead: 6, total: 8 } },
        maxUnhealthyPercent: 20,
      }),
    },
    'RepairHeld',
  ],
];

const looked = (s: Step) => ({
  reason: s.status?.provisioned?.reason,
  next: s.next.kind === 'requeue' ? s.next.seconds : s.next.kind,
});

describe('--instance-poll-interval sets when a waiting step looks again', () => {
  it.each(cases)('%s: after the flag, else after 5 s', (_name, inputs, reason) => {
    expect(POLL_SECONDS).toBe(5);
    expect(looked(decide(inputs))).toEqual({ reason, next: 5 });
    expect(looked(decide({ ...inputs, pollSeconds: 1 }))).toEqual({ reason, next: 1 });
    expect(looked(decide({ ...inputs, pollSeconds: 30 }))).toEqual({ reason, next: 30 });
  });
});

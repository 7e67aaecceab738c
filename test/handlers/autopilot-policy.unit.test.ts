import type { RotationSpec } from '../../crds/proxy-types.js';
import { autopilotPolicy } from '../../handlers/autopilot-policy.js';
import type { Autopilot } from '../../handlers/proxy-state-machine.js';
import { NOW, stateMachineProxy } from './state-machine-proxy.js';

const FLAGS = { replaceUnhealthyAfterSeconds: 900, rotationDrainSeconds: 120 };
/** What a proxy with nothing set gets: the fleet's grace and drain, no rotation. */
const OFF: Autopilot = {
  now: NOW,
  unhealthyAfterSeconds: 900,
  maxAgeSeconds: 0,
  drainSeconds: 120,
  rotatesOnBans: false,
};

describe("autopilotPolicy: the proxy's spec.rotation over the operator's flags", () => {
  it.each<[string, RotationSpec, string | undefined, Autopilot]>([
    ['nothing set: the fleet grace, no rotation on age or bans', {}, undefined, OFF],
    [
      "the proxy's own grace wins over --replace-unhealthy-after",
      { unhealthyAfterSeconds: 60 },
      undefined,
      { ...OFF, unhealthyAfterSeconds: 60 },
    ],
    [
      'a grace of 0 (never replace) is kept, not taken for unset',
      { unhealthyAfterSeconds: 0 },
      undefined,
      { ...OFF, unhealthyAfterSeconds: 0 },
    ],
    ['rotation on age', { maxAgeSeconds: 3600 }, undefined, { ...OFF, maxAgeSeconds: 3600 }],
    ['rotation on bans, not due', { whenCoolingDownOn: 3 }, undefined, { ...OFF, rotatesOnBans: true }],
    [
      'rotation on bans, due: the reason goes along',
      { whenCoolingDownOn: 3 },
      'cooling down on 3 targets at once',
      { ...OFF, rotatesOnBans: true, bansDue: 'cooling down on 3 targets at once' },
    ],
  ])('%s', (_what, rotation, bansDue, want) => {
    const proxy = stateMachineProxy({ spec: { rotation }, status: { phase: 'Ready' } });
    expect(autopilotPolicy(proxy, FLAGS, NOW, bansDue)).toEqual(want);
  });
});

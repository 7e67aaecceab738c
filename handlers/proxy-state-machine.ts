// The pure core of the Proxy reconciler: every status, Event and retry decision, for the
// normal path and every failure path, is made from (spec, status, what the provider said, the
// last health verdict). The controller only acts on the world and writes. One module per
// concern under proxy-state-machine/ (types, clocks, status, the Managed, serving, External,
// failure and deletion steps, the budget's slot answer); this file is what the rest may use.

export {
  POLL_SECONDS,
  DELETE_POLL_SECONDS,
  CONFIG_RETRY_SECONDS,
  CLOUD_INIT_RETRY_SECONDS,
  SLOT_POLL_SECONDS,
} from './proxy-state-machine/types.js';
export type {
  Observation,
  HealthVerdict,
  ConditionIntent,
  StatusIntent,
  Action,
  ProxyEventReason,
  EventIntent,
  LogIntent,
  Next,
  Step,
  SlotGrant,
  SlotAsk,
  Inputs,
  Autopilot,
} from './proxy-state-machine/types.js';
export {
  ROTATION_JITTER,
  DEFAULT_ROTATION_DRAIN_SECONDS,
  rotationJitter,
  rotationClock,
  unhealthyGrace,
  unhealthyClock,
} from './proxy-state-machine/clocks.js';
export type { RotationClock, UnhealthyClock } from './proxy-state-machine/clocks.js';
export { findCondition, healthOf } from './proxy-state-machine/status.js';
export { externalStep } from './proxy-state-machine/external-steps.js';
export { slotFor, replacementPendingStep, waitingReason } from './proxy-state-machine/slot-answer.js';
export type { ReplacementTrigger, WaitingReason } from './proxy-state-machine/slot-answer.js';
export {
  needsInventory,
  wantsDriftCheck,
  managedStep,
  slotWanted,
} from './proxy-state-machine/managed-steps.js';
export { drainMessage } from './proxy-state-machine/serving-steps.js';
export { providerErrorStep, unknownProviderStep } from './proxy-state-machine/failures.js';
export type { ProviderFailure } from './proxy-state-machine/failures.js';
export { deletionNeedsInventory, deletionStep } from './proxy-state-machine/deletion.js';

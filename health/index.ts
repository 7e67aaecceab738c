export {
  HealthEngine,
  DEFAULT_CONCURRENCY,
  DEFAULT_JITTER,
  DEFAULT_RECHECK_INTERVAL_MILLIS,
  DEFAULT_EXIT_IP_REFRESH_MILLIS,
} from './health-engine.js';
export type {
  HealthEngineOptions,
  TransitionListener,
  RecheckListener,
  RecheckResult,
  ExitIPListener,
} from './health-engine.js';
export {
  parseExitIP,
  canonicalIP,
  exitIPDue,
  ExitIPFailure,
  EXIT_IP_BODY_LIMIT,
  isPublicAddress,
  echoURLProblem,
  judgeExitIP,
} from './exit-ip.js';
export type { ExitIPReading, ExitIPPolicy } from './exit-ip.js';
export { recheckStep } from './recheck.js';
export type { Recheck, RecheckStep } from './recheck.js';
export type { Prober } from './prober.js';
export { SocketProber } from './socket-prober.js';
export type { SocketProberOptions, TlsStats } from './socket-prober.js';
export type { AddressGuard, Resolve } from './proxy-wire.js';
export { guardedLookup, AddressRefusedError } from './proxy-wire.js';
export { validateProbeTarget, sameEndpoint, InvalidProbeTargetError } from './probe-target.js';
export type { ProbeTarget } from './probe-target.js';
export { ProbeReason } from './probe-reason.js';
export type { ProbeOutcome } from './probe-reason.js';
export { decide, latencyChangedEnough, DEFAULT_LATENCY_POLICY, INITIAL_HEALTH_STATE } from './verdict.js';
export type {
  Verdict,
  HealthState,
  Thresholds,
  LatencyPolicy,
  Decision,
  TransitionCause,
} from './verdict.js';
export { percentile } from './scheduling-stats.js';
export type { SchedulingSnapshot } from './scheduling-stats.js';
export {
  DURATION_METRIC,
  FAILURES_METRIC,
  RECHECKS_METRIC,
  EXIT_IP_FAILURES_METRIC,
} from './health-metrics.js';
export type { Clock } from './clock.js';
export { checkDirectly } from './direct-check.js';
export type { DirectCheck, DirectCheckOptions } from './direct-check.js';

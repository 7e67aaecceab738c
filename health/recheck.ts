// An out-of-schedule recheck of one proxy, asked for when a client found it unreachable: probe
// at once, then every short interval, until a probe that started after the request passes or
// failureThreshold of them fail. Pure, table-tested; the engine only follows the step.

export interface Recheck {
  /** When it was asked for (ms since the epoch): probes that started earlier answer nothing. */
  requestedAt: number;
  /** Failed probes that started after the request. */
  failures: number;
  /** What the asker named the request with (opaque here), handed back with the answer. */
  ticket?: string;
}

export type RecheckStep =
  /** The probe that just ended had started before the request: probe again at once. */
  | { kind: 'probe_now'; recheck: Recheck }
  /** Failed, below the threshold: probe again after the short interval. */
  | { kind: 'probe_soon'; recheck: Recheck }
  /** Answered: the proxy passed (suspicion over) or failed the threshold (Unhealthy). */
  | { kind: 'done'; passed: boolean };

export function recheckStep(
  recheck: Recheck,
  probe: { startedAt: number; success: boolean },
  failureThreshold: number,
): RecheckStep {
  if (probe.startedAt < recheck.requestedAt) return { kind: 'probe_now', recheck };
  if (probe.success) return { kind: 'done', passed: true };
  const failures = recheck.failures + 1;
  if (failures >= failureThreshold) return { kind: 'done', passed: false };
  return { kind: 'probe_soon', recheck: { ...recheck, failures } };
}

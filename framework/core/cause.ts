import type { KubeObject } from './types.js';

/** The framework's two annotations on every handled object (the truth across restarts). */
export interface StateAnnotations {
  /** Generation whose create/update handlers all succeeded. */
  handled: string;
  /** Generation whose handlers failed with PermanentError (not retried until it changes). */
  permanentFailure: string;
}

export function stateAnnotations(prefix: string): StateAnnotations {
  return {
    handled: `${prefix}/last-handled-generation`,
    permanentFailure: `${prefix}/permanent-failure-generation`,
  };
}

/** A generation this process saw fail permanently; `confirmed` once the cache showed its annotation. */
export interface FailedGeneration {
  generation: number;
  confirmed: boolean;
}

/**
 * What this process should still believe about a permanent failure, given the object as
 * cached now. Until the cache shows our own annotation, its absence only means the cache is
 * behind; once it has shown it, its absence at the same generation means a person removed
 * it to ask for a retry, so the memory goes too.
 */
export function failureMemory(
  object: KubeObject,
  annotations: StateAnnotations,
  failed: FailedGeneration | undefined,
): FailedGeneration | undefined {
  if (!failed || failed.generation !== (object.metadata.generation ?? 0)) return undefined;
  const shown = object.metadata.annotations?.[annotations.permanentFailure] === String(failed.generation);
  if (shown) return failed.confirmed ? failed : { ...failed, confirmed: true };
  return failed.confirmed ? undefined : failed;
}

/**
 * The level-triggered decision: which change cause (if any) the object's current state calls
 * for. `seen` says whether this process already handled (or resumed) this object; `triggered`
 * whether a watched object, OperatorContext.trigger() or a requeue asked for an update run.
 */
export function decideCause(
  object: KubeObject,
  annotations: StateAnnotations,
  state: { seen: boolean; triggered: boolean; handledHere?: number; failedHere?: number },
): 'create' | 'update' | 'resume' | undefined {
  const marks = object.metadata.annotations ?? {};
  const generation = object.metadata.generation ?? 0;
  // The *Here values are this process's own writes, which the cache may not show yet; the
  // annotations stay the truth across restarts.
  if (marks[annotations.permanentFailure] === String(generation) || state.failedHere === generation)
    return undefined;
  const annotated = marks[annotations.handled];
  const handled = Math.max(annotated === undefined ? -1 : Number(annotated), state.handledHere ?? -1);
  if (handled < 0) return 'create';
  if (handled < generation) return 'update';
  // First sight wins over a trigger: the resume run already looks at the current state.
  if (!state.seen) return 'resume';
  return state.triggered ? 'update' : undefined;
}

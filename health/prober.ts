import type { ProbeOutcome } from './probe-reason.js';
import type { ProbeTarget } from './probe-target.js';

/** Sends one probe through a proxy. Must resolve (not reject) with an outcome, and promptly once `cancel` aborts. */
export interface Prober {
  probe(target: ProbeTarget, cancel: AbortSignal): Promise<ProbeOutcome>;
  /** Frees what the prober holds for `key` (its agent and connections). */
  release(key: string): Promise<void>;
  close(): Promise<void>;
}

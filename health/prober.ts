import type { ProbeOutcome } from './probe-reason.js';
import type { ProbeTarget } from './probe-target.js';
import type { ExitIPReading } from './exit-ip.js';

/** Sends one probe through a proxy. Must resolve (not reject) with an outcome, and promptly once `cancel` aborts. */
export interface Prober {
  probe(target: ProbeTarget, cancel: AbortSignal): Promise<ProbeOutcome>;
  /**
   * Fetches `target.exitIPURL` through the proxy and reads the address it echoes. Must
   * resolve, never reject. Optional: a prober without it never reports an exit IP.
   */
  readExitIP?(target: ProbeTarget, cancel: AbortSignal): Promise<ExitIPReading>;
  /** Frees what the prober holds for `key` (its agent and connections). */
  release(key: string): Promise<void>;
  close(): Promise<void>;
}

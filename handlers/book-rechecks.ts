// The seam between the lease book's suspicions and the health engine's rechecks, without
// Kubernetes (HealthRunner feeds it the engine's targets): each probe request becomes a
// recheck named by the suspicion's token, and the recheck's end goes back to the book under
// that token. No time crosses it, so the engine's clock and the book's never meet
// (docs/redis.md, "Clocks").
import type { HealthEngine } from '../health/index.js';
import type { HealthObservation, LeaseStore } from '../book/lease-store.js';

export interface BookRechecksOptions {
  engine: Pick<HealthEngine, 'recheck' | 'onRecheck'>;
  store: Pick<LeaseStore, 'onProbeRequest'>;
  /** The address the engine probes for a proxy key, or undefined when it probes none. */
  probedAddress(key: string): string | undefined;
  /** A request about a key the engine does not probe (yet): a chance to catch up first. */
  unknown?(key: string): void;
  /** Hands an observation to the book (the caller logs a failure). */
  tell(key: string, observation: HealthObservation): void;
}

/** Wires them together; returns the function that unwires both directions. */
export function followBookRechecks(options: BookRechecksOptions): () => void {
  const { engine, store, probedAddress, tell } = options;
  const stopRechecks = engine.onRecheck((key, result) => {
    const address = probedAddress(key);
    if (address === undefined) return;
    // Every recheck asked here names its suspicion; one asked elsewhere has nothing to end.
    if (!result.passed) tell(key, { kind: 'down', address });
    else if (result.ticket !== undefined)
      tell(key, { kind: 'probe_passed', address, suspicion: result.ticket });
  });
  // The book also tells, at once, every suspicion raised while nobody listened (and again
  // after each reconnect of a shared book): each is rechecked.
  const stopRequests = store.onProbeRequest((key, address, suspicion) => {
    if (probedAddress(key) === undefined) options.unknown?.(key);
    // A request about an address the engine no longer probes describes nothing current.
    if (probedAddress(key) === address) engine.recheck(key, suspicion);
  });
  return () => {
    stopRequests();
    stopRechecks();
  };
}

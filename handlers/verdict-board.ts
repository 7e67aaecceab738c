import type { HealthVerdict } from './proxy-state-machine.js';
import type { TargetReading } from './repair-hold.js';

/**
 * The last status-affecting verdict per proxy (namespace/name), written by the health
 * runner on transitions and read by the reconciler. Only transitions land here, so a
 * reconcile triggered for any other reason never writes a fresher latency than the last
 * transition did: status writes stay transition-only.
 */
export class VerdictBoard {
  private readonly verdicts = new Map<string, { address: string; verdict: HealthVerdict }>();
  /** The exit IP the engine last read per proxy, at the address it was read through. */
  private readonly exitIPs = new Map<string, { address: string; exitIP: string }>();
  /** What the direct check (no proxy) last said, per probe URL. */
  private readonly targetReadings = new Map<string, TargetReading>();

  /**
   * `address` is the host:port probed, so a verdict never outlives an address change. The
   * first verdict at an address (after a restart, a leader change or a move) is marked so:
   * it rests on a single probe, so the reconciler lets it confirm what status already says.
   */
  set(key: string, address: string, verdict: Omit<HealthVerdict, 'first'>): void {
    const previous = this.verdicts.get(key);
    const first = !previous || previous.address !== address;
    this.verdicts.set(key, { address, verdict: { ...verdict, first } });
  }

  get(key: string, address: string): HealthVerdict | undefined {
    const entry = this.verdicts.get(key);
    return entry && entry.address === address ? entry.verdict : undefined;
  }

  /** An exit IP read through `address` (the engine reports only changes, on any probe). */
  setExitIP(key: string, address: string, exitIP: string): void {
    this.exitIPs.set(key, { address, exitIP });
  }

  /** The exit IP last read through `address`: one read through an old address says nothing. */
  exitIP(key: string, address: string): string | undefined {
    const entry = this.exitIPs.get(key);
    return entry && entry.address === address ? entry.exitIP : undefined;
  }

  /** The direct check of a probe URL (the health runner's, leader-only). */
  setTarget(probeURL: string, reading: TargetReading): void {
    this.targetReadings.set(probeURL, reading);
  }

  /** What the direct check last said of `probeURL`; unknown until it has run in this term. */
  target(probeURL: string): TargetReading {
    return this.targetReadings.get(probeURL) ?? { kind: 'unknown' };
  }

  /** No proxy probes `probeURL` any more. */
  deleteTarget(probeURL: string): void {
    this.targetReadings.delete(probeURL);
  }

  /** The probe URLs with a direct reading. */
  targetURLs(): string[] {
    return [...this.targetReadings.keys()];
  }

  delete(key: string): void {
    this.verdicts.delete(key);
    this.exitIPs.delete(key);
  }

  /** Forgets every verdict: a new leadership term must not act on what an earlier one saw. */
  clear(): void {
    this.verdicts.clear();
    this.exitIPs.clear();
    this.targetReadings.clear();
  }
}

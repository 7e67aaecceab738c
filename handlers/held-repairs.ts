import { Gauge, type Registry } from 'prom-client';
import { holdAfterLift, type RepairHold, type RepairHoldReason } from './repair-hold.js';

/**
 * The repairs holding now, by proxy key: what proxy_operator_repairs_held counts (every proxy
 * whose written step says RepairHeld, a held rollout waiting for its slot included), and when each
 * held proxy's shared cause ended (its grace restarts then: holdAfterLift in repair-hold.ts,
 * which makes the decision; this class only remembers).
 */
export class HeldRepairs {
  private readonly held = new Map<string, { provider: string; reason: RepairHoldReason }>();
  /** Held proxies whose shared cause ended, by key: when (ms). */
  private readonly lifted = new Map<string, number>();

  constructor(registry: Registry) {
    const held = this.held;
    new Gauge({
      name: 'proxy_operator_repairs_held',
      help: 'Managed proxies shown RepairHeld: Unhealthy past their grace, or with a spec change waiting for a slot, whose repair holds because the cause looks shared, or reported dead while too many are, by provider and reason (ProbeTargetUnreachable, ProbeTargetUnchecked, FleetUnhealthy, TargetGroupUnhealthy, ProviderReportsInstancesDead).',
      labelNames: ['provider', 'reason'],
      registers: [registry],
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const { provider, reason } of held.values())
          counts.set(`${provider}\0${reason}`, (counts.get(`${provider}\0${reason}`) ?? 0) + 1);
        for (const [k, n] of counts) {
          const [provider, reason] = k.split('\0');
          this.set({ provider, reason }, n);
        }
      },
    });
  }

  /** The repair-hold `decision` as the proxy's hold ends (holdAfterLift), remembering when its cause ended. */
  afterLift(key: string, decision: RepairHold, now: number, graceSeconds: number): RepairHold {
    const { hold, liftedAt } = holdAfterLift(
      decision,
      { reason: this.held.get(key)?.reason, liftedAt: this.lifted.get(key) },
      now,
      graceSeconds,
    );
    if (liftedAt === undefined) this.lifted.delete(key);
    else this.lifted.set(key, liftedAt);
    return hold;
  }

  /** What the step written for the proxy says: its repair holds (and why), or not. */
  note(key: string, provider: string, reason: RepairHoldReason | undefined): void {
    if (reason) this.held.set(key, { provider, reason });
    else this.forget(key);
  }

  /** The proxy holds no repair any more, or is gone. */
  forget(key: string): void {
    this.held.delete(key);
    this.lifted.delete(key);
  }
}

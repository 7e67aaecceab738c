import { Counter, type Registry } from 'prom-client';

export const TARGET_COOLDOWNS_METRIC = 'proxy_operator_target_cooldowns_total';
/** Targets get their own series up to this many; clients name targets, so the set is open. */
export const MAX_TARGET_SERIES = 50;
/** The series of targets past the cap. */
export const OTHER_TARGETS = '_other';
/** The series of reports that named no target (the global pool). */
export const NO_TARGET = '_global';

/**
 * Cooldowns started or extended by banned/rate_limited reports, by target: a jump for one
 * target is a ban storm (the target is blocking the fleet), not a few bad proxies. The first
 * MAX_TARGET_SERIES targets seen get a series each and later ones share `_other`, so the
 * series count stays bounded whatever clients send.
 */
export class TargetCooldownMetrics {
  private readonly counter: Counter<'target'>;
  private readonly named = new Set<string>();

  constructor(registry: Registry) {
    this.counter = new Counter({
      name: TARGET_COOLDOWNS_METRIC,
      help: `Cooldowns started or extended by banned/rate_limited reports, by target (the first ${MAX_TARGET_SERIES} targets seen; later ones as target="${OTHER_TARGETS}", none as "${NO_TARGET}").`,
      labelNames: ['target'],
      registers: [registry],
    });
  }

  countCooldown(target: string | undefined): void {
    this.counter.inc({ target: this.labelFor(target) });
  }

  private labelFor(target: string | undefined): string {
    if (target === undefined) return NO_TARGET;
    if (this.named.has(target)) return target;
    if (this.named.size >= MAX_TARGET_SERIES) return OTHER_TARGETS;
    this.named.add(target);
    return target;
  }
}

import { createHmac, randomBytes } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';

export const TARGET_COOLDOWNS_METRIC = 'proxy_operator_target_cooldowns_total';
/** Targets get their own series up to this many; clients name targets, so the set is open. */
export const MAX_TARGET_SERIES = 50;
/** The series of targets past the cap. */
export const OTHER_TARGETS = '_other';
/** The series of reports that named no target (the global pool). */
export const NO_TARGET = '_global';

/**
 * The way a ban came in: a client's report to the API, or the gateway's own (a ban or
 * rate-limit status it saw on plain HTTP, or a tunnel client's session report to it).
 */
export type CooldownDoor = 'api' | 'gateway';

/**
 * A target's label when targets are not named (the default): `t-` and 12 hex digits of an
 * HMAC under a key drawn at start-up, so a scrape (unauthenticated) cannot learn or guess
 * which sites the teams crawl, while one target keeps one series (the ban-storm alert works).
 * The operator's `proxy cooling down` log lines give each target with its pseudonym.
 */
export function targetPseudonym(key: Buffer, target: string): string {
  return `t-${createHmac('sha256', key).update(target).digest('hex').slice(0, 12)}`;
}

/**
 * Cooldowns started by banned/rate_limited reports (a report lengthening a running one is not
 * another proxy benched), by target and door: a jump for one target is a ban storm (the target is blocking the fleet), not a few bad proxies.
 * One per process (handlers/ builds it and hands it to both doors), so a target keeps one
 * pseudonym and one place in the series cap whichever door its bans come through. The first
 * MAX_TARGET_SERIES targets seen get a series each and later ones share `_other`, so the
 * series count stays bounded whatever clients send. Targets are client-chosen and private to
 * their team: the label is a pseudonym unless `nameTargets` (`--metrics-target-names`).
 */
export class TargetCooldownMetrics {
  private readonly counter: Counter<'target' | 'door'>;
  private readonly named = new Set<string>();
  private readonly key = randomBytes(32);

  constructor(
    registry: Registry,
    private readonly nameTargets = false,
  ) {
    this.counter = new Counter({
      name: TARGET_COOLDOWNS_METRIC,
      help: `Cooldowns started by banned/rate_limited reports (proxies benched; reports extending a running cooldown are not counted), by target (the first ${MAX_TARGET_SERIES} targets seen; later ones as target="${OTHER_TARGETS}", none as "${NO_TARGET}") and by door (api: a client's report; gateway: the gateway's own).`,
      labelNames: ['target', 'door'],
      registers: [registry],
    });
  }

  /** One cooldown started, counted once, by the door its report came through. */
  countCooldown(target: string | undefined, door: CooldownDoor): void {
    this.counter.inc({ target: this.labelFor(target), door });
  }

  /** The label a target's series carries (its pseudonym unless targets are named). */
  labelOf(target: string | undefined): string {
    if (target === undefined) return NO_TARGET;
    return this.nameTargets ? target : targetPseudonym(this.key, target);
  }

  private labelFor(raw: string | undefined): string {
    if (raw === undefined) return NO_TARGET;
    const target = this.labelOf(raw);
    if (this.named.has(target)) return target;
    if (this.named.size >= MAX_TARGET_SERIES) return OTHER_TARGETS;
    this.named.add(target);
    return target;
  }
}

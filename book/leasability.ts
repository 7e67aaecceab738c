// Why a proxy is or is not leased right now, in one answer (GET /v1/proxies/{namespace}/{name}):
// pure, so the rule is table-tested without a store, and kept beside isLeasable so the two
// cannot disagree (a table test checks that they do not).
import type { ProxyRecord } from './catalog.js';
import type { ProxyCooldown, ProxyUsage } from './lease-store.js';

export interface CooldownView {
  target: string | null;
  until: string;
  hidden?: true;
}

export const NOT_LEASABLE_CODES = [
  'deleting',
  'draining',
  'leases_disabled',
  'no_address',
  'unhealthy',
  'suspect',
  'full',
  'cooling_down',
] as const;

export type NotLeasableCode = (typeof NOT_LEASABLE_CODES)[number];

/** One reason against leasing a proxy: a closed union, each code with what explains it. */
export type NotLeasableReason =
  /** Its Proxy is being deleted. */
  | { code: 'deleting'; message: string }
  /** It is drained before its instance is replaced: live leases finish, no new ones. */
  | { code: 'draining'; message: string }
  /** spec.maxLeases is 0: listed, never leased. */
  | { code: 'leases_disabled'; message: string }
  /** It has no address yet (or its host is not one address). */
  | { code: 'no_address'; message: string }
  /** The health verdict (status, or the health engine's news ahead of it) is unhealthy. */
  | { code: 'unhealthy'; healthReason: string | null; phase: string; message: string }
  /** An unreachable report holds it out until a probe passes. */
  | { code: 'suspect'; message: string }
  /** Every lease slot is taken. */
  | { code: 'full'; activeLeases: number; maxLeases: number; message: string }
  /**
   * It is cooling down for these targets (null: the global pool). Only the asked target's
   * cooldown keeps it from a lease: it stays leasable for the others.
   */
  | { code: 'cooling_down'; cooldowns: CooldownView[]; message: string };

export interface Leasability {
  /** Whether a lease for `target` (selector aside) could be given this proxy now. */
  leasable: boolean;
  /** The target the answer is for; null = a lease naming no target (the global pool). */
  target: string | null;
  /** Every reason against it, in a fixed order; cooling_down may appear while leasable is true. */
  reasons: NotLeasableReason[];
}

/**
 * Every reason `proxy` is not leased now, given the book's `usage` and running `cooldowns`,
 * for a lease naming `target` (undefined: none). Order: what the resource says (deleting,
 * draining, leases_disabled, no_address, unhealthy), then what the book says (suspect,
 * full, cooling_down).
 */
export function leasability(
  proxy: ProxyRecord,
  usage: ProxyUsage,
  cooldowns: readonly ProxyCooldown[],
  now: number,
  target?: string,
): Leasability {
  const reasons: NotLeasableReason[] = [];
  if (proxy.phase === 'Deleting') {
    reasons.push({ code: 'deleting', message: 'its Proxy is being deleted' });
  }
  if (proxy.draining === true) {
    reasons.push({
      code: 'draining',
      message: 'drained before its instance is replaced: live leases run to their end, no new ones',
    });
  }
  if (proxy.maxLeases <= 0) {
    reasons.push({ code: 'leases_disabled', message: 'spec.maxLeases is 0: listed, never leased' });
  }
  if (proxy.ip === '') {
    reasons.push({ code: 'no_address', message: 'it has no address (yet) to hand out' });
  }
  if (!proxy.healthy || usage.held === 'down') {
    const healthReason = proxy.healthy ? null : (proxy.healthReason ?? null);
    reasons.push({
      code: 'unhealthy',
      healthReason,
      phase: proxy.phase,
      message: proxy.healthy
        ? 'the health engine found it unhealthy (its status follows)'
        : `unhealthy (phase ${proxy.phase}${healthReason === null ? '' : `, reason ${healthReason}`})`,
    });
  }
  if (usage.held === 'suspect') {
    reasons.push({ code: 'suspect', message: 'an unreachable report holds it out until a probe passes' });
  }
  if (proxy.maxLeases > 0 && usage.activeLeases >= proxy.maxLeases) {
    reasons.push({
      code: 'full',
      activeLeases: usage.activeLeases,
      maxLeases: proxy.maxLeases,
      message: `all ${proxy.maxLeases} lease slots are taken`,
    });
  }
  const running = cooldowns
    .filter((c) => c.until > now)
    .sort((a, b) => a.until - b.until || key(a).localeCompare(key(b)));
  if (running.length > 0) {
    reasons.push({
      code: 'cooling_down',
      cooldowns: running.map((c) => ({
        target: c.target ?? null,
        until: new Date(c.until).toISOString(),
        ...(c.hidden === true ? { hidden: true as const } : {}),
      })),
      message: `cooling down for ${running.length} target${running.length === 1 ? '' : 's'} after rate_limited/banned reports`,
    });
  }
  const blocked = reasons.some((r) => r.code !== 'cooling_down');
  const coolingForTarget = running.some((c) => c.hidden !== true && c.target === target);
  return { leasable: !blocked && !coolingForTarget, target: target ?? null, reasons };
}

function key(c: ProxyCooldown): string {
  return c.hidden === true ? '\uffff' : (c.target ?? '');
}

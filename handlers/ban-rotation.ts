import type { ProxyStanding } from '../book/lease-store.js';
import { COOLDOWN_JITTER } from '../book/cooldown-policy.js';
import { CONDITION_PROVISIONED, type Proxy } from '../crds/proxy-types.js';

/**
 * Rotation on bans (issue 24 item 3): a proxy cooling down on at least
 * `spec.rotation.whenCoolingDownOn` targets at once has an IP the sites have learnt. The
 * signal is the lease book's cooldowns; the reconciler reads them through this small
 * interface (owned here, the consumer), so it depends on no store.
 */
export interface CooldownSource {
  /** The proxy's running cooldowns: each named target's end (ms since the epoch), and the book's clock. */
  cooldowns(
    proxyID: string,
  ): Promise<{ now: number; targets: ReadonlyArray<{ target: string; until: number }> }>;
}

/**
 * The lease store's `standing` as a CooldownSource: global-pool cooldowns (no target) are not
 * a target's ban, nor is one the reports behind do not agree on (one untrusted token alone:
 * book/ban-agreement.ts), so one token cannot rotate the fleet.
 */
export function cooldownSource(store: { standing(proxyID: string): Promise<ProxyStanding> }): CooldownSource {
  return {
    async cooldowns(proxyID) {
      const { now, cooldowns } = await store.standing(proxyID);
      return {
        now,
        targets: cooldowns.flatMap((c) =>
          c.target === undefined || c.agreed === false ? [] : [{ target: c.target, until: c.until }],
        ),
      };
    },
  };
}

export type BanRotation =
  | { kind: 'off' }
  | { kind: 'below'; targets: readonly string[] }
  | { kind: 'due'; targets: readonly string[]; why: string };

/**
 * The ban rotation decision. Counts the distinct targets still cooling down whose cooldown
 * ends later than a first cooldown (`--cooldown`, at most +10 % jitter) begun before the
 * instance came up could. The lease book forgets a proxy's cooldowns when its egress is
 * renewed (book/egress.ts, docs/decisions/0020-reports-a-ban-rests-a-rate-limit-paces-a-dead-proxy-leaves.md), but a replacement that keeps its egress
 * (one exit IP behind a NAT gateway, an address handed out again) keeps them, rightly for
 * leasing, and they must not rotate it again at once; nor may those a shared book has not yet
 * forgotten (it hears of the new egress in the background). The price: a ban in the
 * instance's first 20 % of `--cooldown` (10 % for the floor's jitter, 10 % for the ban's own,
 * which may shorten it) may count only once it repeats.
 * `threshold` is spec.rotation.whenCoolingDownOn; absent = off.
 */
export function banRotation(
  threshold: number | undefined,
  reading: Awaited<ReturnType<CooldownSource['cooldowns']>>,
  upSince: number,
  baseCooldownSeconds: number,
): BanRotation {
  if (threshold === undefined || threshold < 1) return { kind: 'off' };
  const floor = (Number.isNaN(upSince) ? 0 : upSince) + baseCooldownSeconds * 1000 * (1 + COOLDOWN_JITTER);
  const targets = [
    ...new Set(reading.targets.filter((c) => c.until > reading.now && c.until >= floor).map((c) => c.target)),
  ].sort();
  if (targets.length < threshold) return { kind: 'below', targets };
  // Targets are the teams' private business (issue 48): the Event and condition count them.
  return {
    kind: 'due',
    targets,
    why: `rotation due (spec.rotation.whenCoolingDownOn ${threshold}): cooling down on ${targets.length} targets at once`,
  };
}

/**
 * Why the proxy is due a rotation on bans now, read from the book's cooldowns; undefined when
 * spec.rotation.whenCoolingDownOn is unset or the rotation is not due. A book that cannot
 * answer is "not due" (`unreadable` hears why): a rotation waits for a reading, never guesses.
 */
export async function readBansDue(
  source: CooldownSource,
  proxy: Proxy,
  proxyID: string,
  baseCooldownSeconds: number,
  unreadable: (err: Error) => void,
): Promise<string | undefined> {
  const threshold = proxy.spec.rotation?.whenCoolingDownOn;
  if (threshold === undefined) return undefined;
  try {
    const decision = banRotation(
      threshold,
      await source.cooldowns(proxyID),
      upSince(proxy),
      baseCooldownSeconds,
    );
    return decision.kind === 'due' ? decision.why : undefined;
  } catch (err) {
    unreadable(err as Error);
    return undefined;
  }
}

/** When the proxy's current instance (or External endpoint) came up: Provisioned's turn to True. */
export function upSince(proxy: Proxy): number {
  const c = proxy.status?.conditions?.find((x) => x.type === CONDITION_PROVISIONED);
  return c?.status === 'True' && c.lastTransitionTime ? Date.parse(c.lastTransitionTime) : Number.NaN;
}

/**
 * Whether the drift timer looks at the proxy for its bans: only with the policy set, not
 * while being deleted, and not mid-replacement (the state machine's own requeues drive that).
 */
export function wantsBanCheck(proxy: Proxy): boolean {
  return (
    proxy.spec.rotation?.whenCoolingDownOn !== undefined &&
    !proxy.metadata.deletionTimestamp &&
    (proxy.spec.mode === 'External' || proxy.status?.phase === 'Ready')
  );
}

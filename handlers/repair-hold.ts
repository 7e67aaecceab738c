// Whether the autopilot may repair (replace) an Unhealthy Managed proxy now, or must hold
// because the failure more likely has one shared cause than many dead proxies. A shared cause
// (the probe target down or refusing the proxies, the operator's egress or DNS broken, the
// provider's network) turns many proxies Unhealthy at once; replacing them would throw away
// every IP and fix nothing. As Karpenter's node repair does, the hold reads signals, in order:
// the probe target fails when checked directly, without a proxy; more than a fraction of the
// provider's proxies are Unhealthy at once; more than that fraction of the proxies probing the
// same target (its origin) are Unhealthy at once (named so too when the rest of the provider is
// fine: the site, not the provider's network). The counting rules leave out proxies whose
// own target fails directly: their failure is explained and says nothing of anyone else's. And
// teams share a provider (a team is a namespace): a share over the percentage holds a proxy only
// if its own namespace's part of it is over too, so one team's trouble does not hold another's
// repairs while a cause that reaches every team (the provider down) still holds everyone.

/** What the direct check (no proxy) last said of a probe URL. */
export type TargetReading =
  | { kind: 'reachable' }
  | { kind: 'unreachable'; message: string }
  /**
   * Never fetched: the URL is inside (the External endpoints' rule, providers config
   * `external:`), and the operator fetches nothing inside. No reference: the counting rules decide.
   */
  | { kind: 'refused'; message: string }
  /** Not checked yet in this leadership term (the first check runs at the next health sync). */
  | { kind: 'unknown' };

/** Why repairs hold: a closed list, the reason on the Proxies' condition, Event and metric. */
export type RepairHoldReason =
  | 'ProbeTargetUnreachable'
  | 'ProbeTargetUnchecked'
  | 'FleetUnhealthy'
  | 'TargetGroupUnhealthy'
  /** Too many serving proxies' instances reported Stopped/Terminated at once (dead-instance-hold.ts). */
  | 'ProviderReportsInstancesDead';

export const REPAIR_HOLD_REASONS: readonly RepairHoldReason[] = [
  'ProbeTargetUnreachable',
  'ProbeTargetUnchecked',
  'FleetUnhealthy',
  'TargetGroupUnhealthy',
  'ProviderReportsInstancesDead',
];

export type RepairHold = { kind: 'go' } | { kind: 'hold'; reason: RepairHoldReason; message: string };

/** Some proxies, and how many of them are Unhealthy. */
export interface Share {
  unhealthy: number;
  total: number;
}

/** A provider's Managed proxies of one namespace probing one URL (not being deleted). */
export interface ProbeURLShare extends Share {
  probeURL: string;
  namespace: string;
}

/** The shares the counting rules judge, and the asking proxy's namespace's part of each. */
export interface Shares {
  fleet: Share;
  group: Share;
  /** Of `fleet` and `group`, the proxies of the asking proxy's namespace (its team). */
  team: { fleet: Share; group: Share };
}

export interface RepairHoldInputs {
  provider: string;
  /** The asking proxy's namespace: its team. */
  namespace: string;
  probeURL: string;
  /** The direct check of this proxy's probe URL. */
  target: TargetReading;
  /** The provider's Managed proxies, this one included, less those explained (sharesFor). */
  fleet: Share;
  /** Of `fleet`, those probing this proxy's target group (targetGroup). */
  group: Share;
  /** Of `fleet` and `group`, those of this proxy's namespace (teamWithin). */
  team: { fleet: Share; group: Share };
  /** `--repair-hold-unhealthy-percent`; 100 turns both counting rules off. */
  maxUnhealthyPercent: number;
}

/** 20 %, as Karpenter's node repair: more Unhealthy proxies than that at once look like one cause. */
export const DEFAULT_REPAIR_HOLD_UNHEALTHY_PERCENT = 20;

/**
 * The fewest Unhealthy proxies of one target group that hold it. One or two proxies dying in
 * the same grace happens by chance; three failing together with their target up directly is
 * the target refusing them. Below it a small group is repaired (a pair refused by its target
 * costs two IPs: their replacements fail too, and one repair per Ready stops there).
 */
export const MIN_TARGET_GROUP_UNHEALTHY = 3;

/**
 * How many of `total` proxies may be Unhealthy at once with repairs going on: the percentage,
 * rounded down, never below 1 (a small fleet can still repair its one dead proxy).
 */
export function unhealthyAllowed(total: number, percent: number): number {
  return Math.max(1, Math.floor((percent * total) / 100));
}

/**
 * Whether a namespace's part of a share over the percentage is within it on its own: its
 * healthy proxies then say the cause does not reach it, and its Unhealthy ones are its own
 * (another team's site refusing that team's proxies, another team's bad image). The
 * percentage without the floor of one: a part too small for the percentage to allow one proxy
 * (fewer than 5 at 20 %) cannot tell, and follows the wider share's verdict. A namespace over
 * it too is held: the cause reaches it (the provider down holds every team of 2 or more).
 */
export function teamWithin(team: Share, percent: number): boolean {
  return team.unhealthy <= Math.floor((percent * team.total) / 100);
}

/**
 * The target group of a probe URL: its origin (scheme, host, port), the path left out. A site
 * refuses a proxy's address on every page (an IP block, a WAF, a rate limit), so two teams
 * probing two pages of one site share that cause; two ports or hosts are two servers, judged
 * apart. Not the bare host: sites on one address (tests' loopback, a shared front) would merge.
 * A URL without an origin is its own group.
 */
export function targetGroup(probeURL: string): string {
  try {
    const origin = new URL(probeURL).origin;
    return origin === 'null' ? probeURL : origin;
  } catch {
    return probeURL;
  }
}

/**
 * Whether a proxy in this phase counts in the shares: only those the probes judge (Ready or
 * Unhealthy). One without a probed instance (Pending, Provisioning, Failed) says nothing of the
 * way from the proxies to the targets, and counted it diluted a shared cause: another team's
 * 100 Pending proxies made a provider outage of all 20 serving proxies "17 %", and every repair
 * went ahead.
 */
export function judgedByProbes(phase: string | undefined): boolean {
  return phase === 'Ready' || phase === 'Unhealthy';
}

/**
 * Counts Managed proxies and Unhealthy ones per probe URL and namespace (the budget's cache
 * tally, judgedByProbes).
 */
export function tallyByProbeURL(
  proxies: Iterable<{ probeURL: string; namespace: string; unhealthy: boolean }>,
): ProbeURLShare[] {
  const byURL = new Map<string, ProbeURLShare>();
  for (const p of proxies) {
    const key = `${p.namespace}\0${p.probeURL}`;
    const share = byURL.get(key) ?? { probeURL: p.probeURL, namespace: p.namespace, unhealthy: 0, total: 0 };
    share.total++;
    if (p.unhealthy) share.unhealthy++;
    byURL.set(key, share);
  }
  return [...byURL.values()];
}

/**
 * The shares the counting rules judge for a proxy of `namespace` probing `probeURL`: the
 * provider's, its target group's, and its namespace's part of each. Proxies whose probe URL
 * fails directly are left out of all, healthy or not: they are held for that
 * (ProbeTargetUnreachable), and their state tells nothing of the way from the proxies to any
 * other target. An unchecked URL's proxies count (the safe side).
 */
export function sharesFor(
  byURL: readonly ProbeURLShare[],
  probeURL: string,
  target: (url: string) => TargetReading,
  namespace: string,
): Shares {
  const group = targetGroup(probeURL);
  const add = (to: Share, s: Share) => {
    to.unhealthy += s.unhealthy;
    to.total += s.total;
  };
  const shares: Shares = {
    fleet: { unhealthy: 0, total: 0 },
    group: { unhealthy: 0, total: 0 },
    team: { fleet: { unhealthy: 0, total: 0 }, group: { unhealthy: 0, total: 0 } },
  };
  for (const s of byURL) {
    if (target(s.probeURL).kind === 'unreachable') continue;
    const ours = s.namespace === namespace;
    const inGroup = targetGroup(s.probeURL) === group;
    add(shares.fleet, s);
    if (ours) add(shares.team.fleet, s);
    if (inGroup) add(shares.group, s);
    if (inGroup && ours) add(shares.team.group, s);
  }
  return shares;
}

/**
 * Whether the target group explains a provider-wide share over the percentage: the provider's
 * proxies outside the group (`fleet` less `group`) are within it on their own (teamWithin's
 * rule, no floor of one). Their health says the way from the provider to other targets works,
 * so the excess is the group's target refusing its proxies, not the provider's network: a site
 * refusing one team's 5 proxies (5 of 10, the other 5 Ready) is that site's doing. With no
 * proxy outside the group (the whole provider probes one site) nothing tells them apart, and
 * the provider's reason stands; so it does when the rest is over too (two sites refusing at
 * once, or the provider down).
 */
export function groupExplainsFleet(fleet: Share, group: Share, percent: number): boolean {
  const rest: Share = { unhealthy: fleet.unhealthy - group.unhealthy, total: fleet.total - group.total };
  return rest.total > 0 && teamWithin(rest, percent);
}

/**
 * The decision. The direct check comes first (it names the cause); then the two counting
 * rules: the provider-wide one (an outage of the provider's network holds whatever the
 * targets) and the target group's (a target refusing the proxies that probe it, however few of
 * the provider they are). Each holds only if the proxy's namespace's part is over too
 * (teamWithin): another team's trouble alone, however large a part of the provider or the
 * group, holds nothing. When both hold, the reason is the one the evidence names
 * (groupExplainsFleet): the group's when the rest of the provider is fine, else the
 * provider's; its runbook step sends the SRE to the site or to the provider's network. An
 * unchecked target holds too: a restarted operator must not repair a fleet the first second,
 * before it knows whether the target answers (the first check follows within a health sync).
 */
export function repairHold(i: RepairHoldInputs): RepairHold {
  if (i.target.kind === 'unreachable')
    return {
      kind: 'hold',
      reason: 'ProbeTargetUnreachable',
      message: `repair held: the probe target ${i.probeURL} fails when the operator checks it directly, without a proxy (${i.target.message}); a new instance would not fix that`,
    };
  if (i.target.kind === 'unknown')
    return {
      kind: 'hold',
      reason: 'ProbeTargetUnchecked',
      message: `repair held: the probe target ${i.probeURL} has not been checked directly yet`,
    };
  if (i.maxUnhealthyPercent >= 100) return { kind: 'go' };
  // The messages carry no counts: one status write and one Event per hold.
  const percent = i.maxUnhealthyPercent;
  // The team's part, named so a team reads why its own proxies count; no other team is named.
  const team = `namespace ${i.namespace}'s too (or too few of them to judge apart)`;
  const fleetOver =
    i.fleet.unhealthy > unhealthyAllowed(i.fleet.total, percent) && !teamWithin(i.team.fleet, percent);
  const groupOver =
    i.group.unhealthy >= MIN_TARGET_GROUP_UNHEALTHY &&
    i.group.unhealthy > unhealthyAllowed(i.group.total, percent) &&
    !teamWithin(i.team.group, percent);
  if (groupOver && (!fleetOver || groupExplainsFleet(i.fleet, i.group, percent)))
    return {
      kind: 'hold',
      reason: 'TargetGroupUnhealthy',
      message: `repair held: more than ${percent}% (and at least ${MIN_TARGET_GROUP_UNHEALTHY}) of provider ${i.provider}'s proxies probing ${targetGroup(i.probeURL)} are Unhealthy at once, ${team} (--repair-hold-unhealthy-percent), though it answers the operator directly: the target refusing them is likelier than that many dead proxies, and it would refuse new instances too`,
    };
  if (fleetOver)
    return {
      kind: 'hold',
      reason: 'FleetUnhealthy',
      message: `repair held: more than ${percent}% of provider ${i.provider}'s proxies are Unhealthy at once, ${team} (--repair-hold-unhealthy-percent; proxies whose probe target fails directly not counted): a shared cause is likelier than that many dead proxies`,
    };
  return { kind: 'go' };
}

/** What the shell remembers of a proxy's hold: its reason, and when its cause ended (ms). */
export interface HoldMemory {
  reason?: RepairHoldReason;
  liftedAt?: number;
}

/**
 * The hold as it ends. A shared outage ends proxy by proxy: once the Unhealthy share falls to
 * what is allowed, the last ones are still Unhealthy and long past a grace that ran while they
 * were held; replacing them would throw away IPs that recover seconds later. So a proxy that
 * was held gets its full grace again from the moment its cause ended; held time never counts.
 * Pure: `memory` is what the shell kept, `liftedAt` what it should keep next.
 */
export function holdAfterLift(
  decision: RepairHold,
  memory: HoldMemory,
  now: number,
  graceSeconds: number,
): { hold: RepairHold; liftedAt?: number } {
  if (decision.kind === 'hold') return { hold: decision };
  if (memory.reason === undefined) return { hold: decision };
  const liftedAt = memory.liftedAt ?? now;
  // The message is the same for the whole wait: one status write, one Event.
  if (now - liftedAt >= graceSeconds * 1000) return { hold: decision };
  return {
    hold: {
      kind: 'hold',
      reason: memory.reason,
      message: `repair held: its shared cause (${memory.reason}) ended at ${new Date(liftedAt).toISOString()}; held time does not count toward the grace, so this proxy gets ${graceSeconds} s from then to recover`,
    },
    liftedAt,
  };
}

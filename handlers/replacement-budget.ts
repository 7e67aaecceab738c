import type { CacheReader } from '../framework/index.js';
import type { Proxy, ProxyPhase, ReplacementStatus } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { proxyKey } from './proxy-address.js';
import { judgedByProbes, tallyByProbeURL, type ProbeURLShare } from './repair-hold.js';

/** A cap on replacements in flight: a count, or a percentage of the provider's proxies. */
export type Cap = { kind: 'count'; value: number } | { kind: 'percent'; value: number };

/** `--max-unavailable`: a default cap for every provider, and per-provider overrides. */
export interface MaxUnavailable {
  default: Cap;
  byProvider: Readonly<Record<string, Cap>>;
}

/** As Deployments do: a quarter of the fleet, at least one. */
export const DEFAULT_MAX_UNAVAILABLE: MaxUnavailable = {
  default: { kind: 'percent', value: 25 },
  byProvider: {},
};

/** The cap for one provider with `total` Managed proxies: a percentage rounds down, never below 1. */
export function capFor(setting: MaxUnavailable, provider: string, total: number): number {
  const cap = setting.byProvider[provider] ?? setting.default;
  if (cap.kind === 'count') return cap.value;
  return Math.max(1, Math.floor((cap.value * total) / 100));
}

/**
 * What a replacement waits on. A rollout (a spec change, a rotation) takes a serving proxy out
 * of service, so everything out of service counts, Unhealthy proxies included: a bad rollout
 * stops after the cap. A repair (replacing a proxy that is already Unhealthy) takes nothing out
 * of service, so only replacements in flight count: otherwise a fleet with more dead proxies
 * than the cap would never repair any of them. A held rollout (the spec change of an Unhealthy
 * proxy whose repair is held: the cause looks shared, so it may be serving) counts replacements
 * in flight and those not yet verified (Unhealthy since): a bad rollout during an outage stops
 * after the cap, while the held proxies, Unhealthy all at once, do not block each other forever.
 */
export type SlotKind = 'rollout' | 'repair' | 'held-rollout';

export interface SlotAnswer {
  granted: boolean;
  /** The provider's proxies counted against the cap, this one excluded. */
  inFlight: number;
  cap: number;
  /**
   * Proxies (namespace/name) of the asking proxy's namespace whose replacement failed
   * permanently and holds a slot, sorted. Another namespace's hold no slot of this one
   * (countedFor), and are never named to it.
   */
  failed: readonly string[];
}

/** A proxy as the budget sees it. */
export interface BudgetView {
  key: string;
  phase: ProxyPhase | undefined;
  /** status.replacement is set: a proxy that served is between instances. */
  replacing: boolean;
  /** Draining before a rotation (status.replacement.cause Rotation): out of leases already. */
  draining?: boolean;
}

/** The provider's proxies each slot kind counts against the cap. */
export interface OutOfService {
  /** Provisioning (created or being replaced), or a failed replacement holding its slot. */
  replacing: ReadonlySet<string>;
  unhealthy: ReadonlySet<string>;
  /** Unhealthy with status.replacement set: a new instance not yet seen to work. */
  unverified: ReadonlySet<string>;
  failed: ReadonlySet<string>;
}

/**
 * Who holds a slot. Pending proxies and Failed ones that never served took nothing out of
 * service, so they do not count; a Failed one that was a replacement does, until its spec
 * changes or a person acts: otherwise a bad image would free its slot on failing and roll
 * through the whole fleet.
 */
export function outOfService(proxies: Iterable<BudgetView>): OutOfService {
  const replacing = new Set<string>();
  const unhealthy = new Set<string>();
  const unverified = new Set<string>();
  const failed = new Set<string>();
  for (const p of proxies) {
    if (p.phase === 'Provisioning' || p.draining === true) replacing.add(p.key);
    else if (p.phase === 'Unhealthy') {
      unhealthy.add(p.key);
      if (p.replacing) unverified.add(p.key);
    } else if (p.phase === 'Failed' && p.replacing) {
      replacing.add(p.key);
      failed.add(p.key);
    }
  }
  return { replacing, unhealthy, unverified, failed };
}

/** The namespace of a proxy key (namespace/name). */
export function namespaceOf(key: string): string {
  return key.slice(0, key.indexOf('/'));
}

/**
 * The keys a slot of this kind counts (the asking proxy itself excluded). A replacement that
 * failed permanently counts only against its own namespace's (its team's) replacements: it
 * holds no instance, and holds a slot only to stop its own bad spec rolling on, which is its
 * team's to fix (other teams can neither see nor fix it). Counted for every team, one team's
 * bad image blocked every other team's rollouts and repairs on the provider until that team
 * acted. A bad spec shared by two teams stops each after the cap. `explained`: Unhealthy
 * proxies whose own probe target fails when checked directly. A rollout leaves them out, as the
 * repair hold does (repair-hold.ts): their failure is their target's, and says nothing of the
 * rollout; counted, one team's down site froze every other team's rollout on the provider for
 * as long as it was down. Nor does a rollout count another namespace's Unhealthy proxies: a
 * site refusing one team's proxies (their target answers directly, so nothing explains them)
 * froze every other team's rollout the same way; they say nothing of this team's spec. An
 * unverified replacement (a rollout's outcome not yet seen to work) is counted whoever's and
 * whatever its target says: a bad spec stops after the cap.
 */
export function countedFor(
  kind: SlotKind,
  oos: OutOfService,
  granted: Iterable<string>,
  key: string,
  explained: ReadonlySet<string> = new Set(),
) {
  const team = namespaceOf(key);
  const counted = new Set([...oos.replacing].filter((k) => !oos.failed.has(k) || namespaceOf(k) === team));
  if (kind === 'rollout')
    for (const k of oos.unhealthy)
      if (oos.unverified.has(k) || (!explained.has(k) && namespaceOf(k) === team)) counted.add(k);
  if (kind === 'held-rollout') for (const k of oos.unverified) counted.add(k);
  for (const k of granted) counted.add(k);
  counted.delete(key);
  return counted;
}

/** How stale the cache tally may be: it costs one pass over the cache. */
const TALLY_MILLIS = 1000;

interface Tally {
  at: number;
  total: number;
  oos: OutOfService;
  /** The repair hold's counts (repair-hold.ts): Unhealthy as `oos` counts them, per probe URL and namespace. */
  byProbeURL: readonly ProbeURLShare[];
  /** Each proxy's probe URL, by key. */
  probeURLs: ReadonlyMap<string, string>;
}

/**
 * Paces replacements per provider, as a Deployment's maxUnavailable does: a proxy is replaced
 * only while fewer than the cap of its provider's proxies are out of service (see SlotKind and
 * outOfService for who counts), plus the slots this process granted that the cache may not
 * show yet; a grant is held until the proxy's reconcile writes a status that no longer holds
 * it (holdsSlot: out of Provisioning and not draining).
 * Counting from the cache keeps the cap across restarts and leader changes; the grants keep it
 * between a write and its watch event while three reconciles run at once.
 */
export class ReplacementBudget {
  private readonly granted = new Map<string, string>();
  private readonly tallies = new Map<string, Tally>();

  constructor(
    private readonly setting: MaxUnavailable,
    private readonly now: () => number = Date.now,
  ) {}

  /** `targetFails`: whether a probe URL fails when checked directly (countedFor's `explained`). */
  tryAcquire(
    key: string,
    provider: string,
    cache: CacheReader,
    kind: SlotKind = 'rollout',
    targetFails: (probeURL: string) => boolean = () => false,
  ): SlotAnswer {
    const tally = this.tally(provider, cache);
    const cap = capFor(this.setting, provider, tally.total);
    const grants = [...this.granted].filter(([, p]) => p === provider).map(([k]) => k);
    const explained = new Set(
      [...tally.oos.unhealthy].filter((k) => targetFails(tally.probeURLs.get(k) ?? '')),
    );
    const counted = countedFor(kind, tally.oos, grants, key, explained);
    const failed = [...tally.oos.failed]
      .filter((k) => k !== key && namespaceOf(k) === namespaceOf(key))
      .sort();
    if (this.granted.get(key) === provider) return { granted: true, inFlight: counted.size, cap, failed };
    const granted = counted.size < cap;
    if (granted) this.granted.set(key, provider);
    return { granted, inFlight: counted.size, cap, failed };
  }

  /** The provider's Managed proxies, and how many are Unhealthy now, per probe URL and namespace (repair-hold.ts). */
  unhealthyByProbeURL(provider: string, cache: CacheReader): readonly ProbeURLShare[] {
    return this.tally(provider, cache).byProbeURL;
  }

  /** The proxy left its replacement (or went away): its slot is free. See holdsSlot. */
  release(key: string): void {
    this.granted.delete(key);
  }

  private tally(provider: string, cache: CacheReader): Tally {
    const now = this.now();
    const known = this.tallies.get(provider);
    if (known && now - known.at < TALLY_MILLIS) return known;
    const views: BudgetView[] = [];
    const probeURLs = new Map<string, string>();
    for (const p of cache.list<Proxy>(PROXY_KIND)) {
      if (p.spec.mode !== 'Managed' || p.spec.provider !== provider || p.metadata.deletionTimestamp) continue;
      views.push({
        key: proxyKey(p),
        phase: p.status?.phase,
        replacing: p.status?.replacement !== undefined,
        draining: isDraining(p),
      });
      probeURLs.set(proxyKey(p), p.spec.healthCheck.probeURL);
    }
    const oos = outOfService(views);
    const byProbeURL = tallyByProbeURL(
      views
        .filter((v) => judgedByProbes(v.phase))
        .map((v) => ({
          probeURL: probeURLs.get(v.key) ?? '',
          namespace: namespaceOf(v.key),
          unhealthy: oos.unhealthy.has(v.key),
        })),
    );
    const tally: Tally = { at: now, total: views.length, oos, byProbeURL, probeURLs };
    this.tallies.set(provider, tally);
    return tally;
  }
}

/**
 * Whether a proxy still holds its slot once `written` is in its status: Provisioning (between
 * instances), or draining before a rotation. A status write that says nothing of the
 * replacement record keeps the stored one, so a drain that goes on (its later runs write no
 * record) still holds the slot its start was granted. Released any earlier, the slot would be
 * counted by nothing until the cache tally (up to a second old) showed the drain: a tally made
 * before the drain's own status write reached the cache let another replacement through.
 */
export function holdsSlot(
  stored: ReplacementStatus | undefined,
  written: { phase: ProxyPhase; replacement?: ReplacementStatus | null },
): boolean {
  if (written.phase === 'Provisioning') return true;
  const replacement = written.replacement === undefined ? stored : (written.replacement ?? undefined);
  return replacement?.cause === 'Rotation' && (written.phase === 'Ready' || written.phase === 'Unhealthy');
}

/** A proxy drained before its rotation: still on its instance, out of leases (the catalog agrees). */
export function isDraining(p: Proxy): boolean {
  const phase = p.status?.phase;
  return p.status?.replacement?.cause === 'Rotation' && (phase === 'Ready' || phase === 'Unhealthy');
}

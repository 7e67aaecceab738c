import type { CacheReader } from '../framework/index.js';
import type { Proxy } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';
import { proxyKey } from './proxy-address.js';

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

export interface SlotAnswer {
  granted: boolean;
  /** The provider's unavailable proxies (Provisioning or Unhealthy), this one excluded. */
  inFlight: number;
  cap: number;
}

/** How stale the cache tally may be: it costs one pass over the cache. */
const TALLY_MILLIS = 1000;

interface Tally {
  at: number;
  total: number;
  /** Keys of the provider's proxies out of service: Provisioning (being created or replaced) or Unhealthy. */
  unavailable: Set<string>;
}

/**
 * Paces voluntary replacements per provider, as a Deployment's maxUnavailable does: a serving
 * proxy is replaced only while fewer than the cap of its provider's proxies are out of service.
 * Out of service = the cache shows it Provisioning (being created or replaced) or Unhealthy (a
 * bad rotation stops after the cap instead of breaking the fleet), plus the slots this process
 * granted that the cache may not show yet; a slot is held until the proxy's reconcile writes a
 * phase other than Provisioning. Pending and Failed proxies never served, so they do not count.
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

  tryAcquire(key: string, provider: string, cache: CacheReader): SlotAnswer {
    const tally = this.tally(provider, cache);
    const cap = capFor(this.setting, provider, tally.total);
    const inFlight = new Set(tally.unavailable);
    for (const [k, p] of this.granted) if (p === provider) inFlight.add(k);
    inFlight.delete(key);
    if (this.granted.get(key) === provider) return { granted: true, inFlight: inFlight.size, cap };
    const granted = inFlight.size < cap;
    if (granted) this.granted.set(key, provider);
    return { granted, inFlight: inFlight.size, cap };
  }

  /** The proxy left Provisioning (or went away): its slot is free. */
  release(key: string): void {
    this.granted.delete(key);
  }

  private tally(provider: string, cache: CacheReader): Tally {
    const now = this.now();
    const known = this.tallies.get(provider);
    if (known && now - known.at < TALLY_MILLIS) return known;
    const tally: Tally = { at: now, total: 0, unavailable: new Set() };
    for (const p of cache.list<Proxy>(PROXY_KIND)) {
      if (p.spec.mode !== 'Managed' || p.spec.provider !== provider || p.metadata.deletionTimestamp) continue;
      tally.total++;
      const phase = p.status?.phase;
      if (phase === 'Provisioning' || phase === 'Unhealthy') tally.unavailable.add(proxyKey(p));
    }
    this.tallies.set(provider, tally);
    return tally;
  }
}

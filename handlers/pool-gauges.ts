import { Gauge, type Registry } from 'prom-client';
import type { CacheReader } from '../framework/index.js';
import { PROXY_PHASES, type Proxy, type ProxyPhase } from '../crds/proxy-types.js';
import { PROXY_KIND } from './kinds.js';

export const POOL_METRIC = 'proxy_operator_pool_proxies';
export const PROVISIONING_METRIC = 'proxy_operator_provisioning_seconds';

/** Phases in which a proxy is still on its way to serving; a long stay here is "stuck". */
const PROVISIONING_PHASES: ReadonlySet<ProxyPhase> = new Set(['Pending', 'Provisioning']);

/**
 * An attribute set as one label value: `geo=eu,purpose=crawl` (keys sorted), '' for none.
 * Crawlers select by attributes, so this is the unit a "too few healthy" alert watches.
 */
export function attributeSetLabel(attributes: Readonly<Record<string, string>> | undefined): string {
  return Object.entries(attributes ?? {})
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

export interface PoolCount {
  namespace: string;
  attributes: string;
  phase: ProxyPhase;
  count: number;
}

/**
 * Proxies per (namespace, attribute set, phase). Every phase of a pool that exists is listed,
 * zeros included, so `phase="Ready"` reads 0 (not "no data") when a whole pool is down.
 */
export function poolCounts(proxies: readonly Proxy[]): PoolCount[] {
  const pools = new Map<string, Map<ProxyPhase, number>>();
  for (const p of proxies) {
    const key = JSON.stringify([p.metadata.namespace ?? '', attributeSetLabel(p.spec.attributes)]);
    let phases = pools.get(key);
    if (!phases) pools.set(key, (phases = new Map(PROXY_PHASES.map((phase) => [phase, 0]))));
    const phase = p.status?.phase ?? 'Pending';
    phases.set(phase, (phases.get(phase) ?? 0) + 1);
  }
  const out: PoolCount[] = [];
  for (const [key, phases] of pools) {
    const [namespace, attributes] = JSON.parse(key) as [string, string];
    for (const [phase, count] of phases) out.push({ namespace, attributes, phase, count });
  }
  return out;
}

export interface ProvisioningAge {
  namespace: string;
  /** namespace/name: the same value as the probe histogram's `proxy` label. */
  proxy: string;
  seconds: number;
}

/**
 * How long each Pending or Provisioning proxy has been on its way: since its Provisioned
 * condition last turned False (a replacement starts the clock again), else since creation.
 */
export function provisioningAges(proxies: readonly Proxy[], now: Date): ProvisioningAge[] {
  const out: ProvisioningAge[] = [];
  for (const p of proxies) {
    if (!PROVISIONING_PHASES.has(p.status?.phase ?? 'Pending') || p.metadata.deletionTimestamp) continue;
    const provisioned = p.status?.conditions?.find((c) => c.type === 'Provisioned');
    const since =
      provisioned && provisioned.status !== 'True'
        ? provisioned.lastTransitionTime
        : p.metadata.creationTimestamp;
    const started = since ? Date.parse(since) : Number.NaN;
    if (!Number.isFinite(started)) continue;
    const namespace = p.metadata.namespace ?? '';
    out.push({
      namespace,
      proxy: `${namespace}/${p.metadata.name}`,
      seconds: Math.max(0, (now.getTime() - started) / 1000),
    });
  }
  return out;
}

/**
 * proxy_operator_pool_proxies{namespace,attributes,phase} and
 * proxy_operator_provisioning_seconds{namespace,proxy}: computed from the cache at scrape
 * time (never stale), reset first so a pool or a proxy that is gone leaves no series behind;
 * by the acting leader only (`exported`), so a sum across replicas counts each proxy once.
 */
export function registerPoolGauges(
  registry: Registry,
  cache: () => CacheReader,
  exported: () => boolean,
): void {
  new Gauge({
    name: POOL_METRIC,
    help: 'Proxies by namespace, attribute set (spec.attributes as "k=v,k2=v2", keys sorted) and phase.',
    labelNames: ['namespace', 'attributes', 'phase'],
    registers: [registry],
    collect() {
      this.reset();
      if (!exported()) return;
      for (const c of poolCounts(cache().list<Proxy>(PROXY_KIND))) {
        this.set({ namespace: c.namespace, attributes: c.attributes, phase: c.phase }, c.count);
      }
    },
  });
  new Gauge({
    name: PROVISIONING_METRIC,
    help: 'Seconds each Pending or Provisioning proxy has been on its way to serving (absent once it serves).',
    labelNames: ['namespace', 'proxy'],
    registers: [registry],
    collect() {
      this.reset();
      if (!exported()) return;
      for (const a of provisioningAges(cache().list<Proxy>(PROXY_KIND), new Date())) {
        this.set({ namespace: a.namespace, proxy: a.proxy }, a.seconds);
      }
    },
  });
}

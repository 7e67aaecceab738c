// One round of two teams on one fleet (issue 48 item 6), shared by bench/tenants.ts and
// test/discovery/two-tenants.int.test.ts: on a fresh fleet and site, tenant A binds a few
// sticky sessions and leaves them idle, then crawls the whole site through the Crawlee
// integration (bench:crawl's crawl: a real HttpCrawler at Crawlee's defaults, the site
// banning one proxy and one proxy dying at 30 %), alone or while tenant B, in a process of
// its own, attacks at its limits. What A saw, what B got, and what the fleet went through.
import type { KubeConfig } from '@kubernetes/client-node';
import { crawl, planFaults, type CrawlFigures } from './crawl-scenario.js';
import { TenantBProcess, type TenantBConfig } from './tenant-b-process.js';
import {
  bindStickySessions,
  FLEET_SIZE,
  rotations,
  sessionsMovedSince,
  untilFleetHealthy,
  type RoundOptions,
  type TenantBFigures,
  type TenantsWorld,
} from './tenants-world.js';

/** A's sticky sessions per round (idle while B attacks: the book's least recently used). */
export const STICKY_SESSIONS = 8;
/** One banned proxy and one dying at 30 % of the pages, of 10 (scenario 1's 10 % and 5 %). */
export const FAULTS = planFaults(FLEET_SIZE, 1, 1, 1);

export interface TenantAFigures {
  crawl: CrawlFigures;
  /** A's sticky sessions bound to another proxy after the round without a `moved` (evicted). */
  stickyRebound: number;
}

export interface RoundFigures {
  label: string;
  a: TenantAFigures;
  b?: TenantBFigures;
  /** Proxies rotated or replaced (conditions and Events) in the namespace by the round's end. */
  rotated: string[];
}

export interface RoundSpec extends RoundOptions {
  label: string;
  kc: KubeConfig;
  world: TenantsWorld;
  discoveryURL: string;
  /** Absent: A alone. */
  b?: Pick<TenantBConfig, 'sessions' | 'junkReports' | 'spamFrom'>;
  /** A's crawler at this many fixed tasks (bench:tenants --concurrency); default Crawlee's autoscaled pool. */
  concurrency?: number;
  /** Pin B's process to this core (bench:tenants --apart). */
  bCore?: number;
  progress?: (line: string) => void;
}

export async function tenantRound(spec: RoundSpec): Promise<RoundFigures> {
  const { world, discoveryURL, label } = spec;
  const progress = spec.progress ?? (() => {});
  const round = await world.newRound(label, spec);
  let b: TenantBProcess | undefined;
  try {
    await untilFleetHealthy(discoveryURL, world.tokens.a, round);
    const sticky = await bindStickySessions(
      discoveryURL,
      world.tokens.a,
      round.selector,
      `sticky-${label}`,
      STICKY_SESSIONS,
    );
    if (spec.b) {
      b = new TenantBProcess(
        {
          ...spec.b,
          discoveryURL,
          token: world.tokens.b,
          selector: round.selector,
          namespace: world.namespace,
          proxyNames: round.proxyNames,
        },
        (line) => progress(`B: ${line}`),
        spec.bCore,
      );
      await b.attacking;
      progress('B holds its lease quota and attacks');
    }
    const figures = await crawl({
      world: round.world,
      faults: FAULTS,
      operator: {
        discoveryURL,
        token: world.tokens.a,
        proxyID: round.proxyID,
        selector: round.selector,
      },
      progress,
      ...(spec.concurrency === undefined ? {} : { concurrency: spec.concurrency }),
    });
    b?.stop();
    const bFigures = await b?.figures;
    const stickyRebound = await sessionsMovedSince(discoveryURL, world.tokens.a, round.selector, sticky);
    return {
      label,
      a: { crawl: figures, stickyRebound },
      ...(bFigures ? { b: bFigures } : {}),
      rotated: await rotations(spec.kc, world.namespace),
    };
  } finally {
    b?.kill();
    await round.close(discoveryURL, world.tokens.a);
  }
}

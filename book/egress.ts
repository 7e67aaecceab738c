// When a proxy's cooldowns stop being true (docs/decisions/0020-reports-a-ban-rests-a-rate-limit-paces-a-dead-proxy-leaves.md).
// The lease book keys cooldowns and streaks by proxy (namespace/name), but what a site bans is
// the address it sees. A replacement with a new instance (a rotation on bans, a repair, a spec
// change) usually brings a new address: the old one's cooldowns then only keep the fresh proxy
// away from the very targets it was rotated for. Both stores follow the catalog through this
// rule and forget a proxy's cooldowns and streaks when its egress is renewed.
import type { ProxyRecord } from './catalog.js';

/**
 * What target sites see the proxy as: its exit IP when the operator reads one
 * (spec.healthCheck.exitIPURL), else its listen IP; undefined while it has neither (between
 * instances). The kind is part of the value ("exit …", "ip …"): the two are never compared.
 */
export function egressOf(record: Pick<ProxyRecord, 'ip' | 'exitIP'>): string | undefined {
  if (record.exitIP) return `exit ${record.exitIP}`;
  if (record.ip) return `ip ${record.ip}`;
  return undefined;
}

/**
 * What the book does when a record shows `seen` and it holds `known` for the proxy:
 * - `same`: nothing (no egress to go by, or the one it knows);
 * - `adopt`: remember `seen`, keep the cooldowns (the first egress the book hears of, or a
 *   change of kind: the exit IP read for the first time, or no longer read, says nothing of
 *   a new address; a replacement's listen IP changes while its stale exit IP stays until the
 *   new one is read, so the exit IP decides whenever there is one);
 * - `renewed`: remember `seen` and forget the proxy's cooldowns and streaks: sites have not
 *   seen this address misbehave.
 */
export type EgressStep = 'same' | 'adopt' | 'renewed';

export function egressStep(known: string | undefined, seen: string | undefined): EgressStep {
  if (seen === undefined || seen === known) return 'same';
  if (known === undefined || kindOf(known) !== kindOf(seen)) return 'adopt';
  return 'renewed';
}

function kindOf(egress: string): string {
  return egress.slice(0, egress.indexOf(' '));
}

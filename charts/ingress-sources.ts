import type * as kplus from 'cdk8s-plus-28';

/** One namespace selector, as `matchLabels`: a namespace matches when it carries every pair. */
export type NamespaceLabels = Readonly<Record<string, string>>;

/**
 * The label a namespace carries when its Pods may scrape the operator's /metrics (whose
 * series name teams and pools): `kubectl label namespace <ns> crawl.example.com/metrics-scraper=true`.
 */
export const METRICS_SCRAPER_LABEL = 'crawl.example.com/metrics-scraper';
/** Set by the API server on every namespace, so a selector on it names one namespace no label edit can forge. */
export const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/**
 * Who may reach each port of the operator's Pods, by namespace (any one selector admits). The
 * kubelet's probes come from the node, which NetworkPolicy always admits.
 */
export interface IngressSources {
  /** The metrics port: where Prometheus runs. */
  monitoring: readonly NamespaceLabels[];
  /** The discovery API's port: the crawlers' namespaces. */
  discoveryClients: readonly NamespaceLabels[];
  /** The gateway's port. */
  gatewayClients: readonly NamespaceLabels[];
}

/**
 * The defaults: metrics only from namespaces labelled as scrapers; the discovery API from the
 * namespaces already labelled as crawlers (of the Squid Pods or of the gateway: the README and
 * the real-node run label `default` so before they call it); the gateway from its own label.
 */
export const DEFAULT_INGRESS_SOURCES: IngressSources = {
  monitoring: [{ [METRICS_SCRAPER_LABEL]: 'true' }],
  discoveryClients: [
    { 'crawl.example.com/proxy-client': 'true' },
    { 'crawl.example.com/gateway-client': 'true' },
  ],
  gatewayClients: [{ 'crawl.example.com/gateway-client': 'true' }],
};

/**
 * Selectors from `k=v[,k=v...]` groups separated by `;` (`npm run synth`'s environment), e.g.
 * `kubernetes.io/metadata.name=monitoring;team=obs`. Empty lists and empty selectors are
 * refused naming `what`: in a NetworkPolicy either admits every namespace.
 */
export function parseNamespaceSelectors(what: string, text: string): NamespaceLabels[] {
  const groups = text
    .split(';')
    .map((g) => g.trim())
    .filter((g) => g !== '');
  if (groups.length === 0)
    throw new Error(`${what}: no namespace selector (an empty list would admit every namespace)`);
  return groups.map((group) => {
    const pairs = group.split(',').map((pair) => {
      const eq = pair.indexOf('=');
      const [key, value] = [pair.slice(0, eq).trim(), pair.slice(eq + 1).trim()];
      if (eq <= 0 || key === '') throw new Error(`${what}: "${pair.trim()}" is not label=value`);
      return [key, value] as const;
    });
    return Object.fromEntries(pairs);
  });
}

/** The policy peers of `selectors`, refusing a list or a selector that would admit every namespace. */
export function namespacePeers(
  what: string,
  selectors: readonly NamespaceLabels[],
): kplus.k8s.NetworkPolicyPeer[] {
  if (selectors.length === 0 || selectors.some((s) => Object.keys(s).length === 0))
    throw new Error(`${what}: an empty namespace selector would admit every namespace`);
  return selectors.map((s) => ({ namespaceSelector: { matchLabels: { ...s } } }));
}

/** A selector list as one line for an annotation and the docs: `a=b,c=d or e=f`. */
export function describeSelectors(selectors: readonly NamespaceLabels[]): string {
  return selectors
    .map((s) =>
      Object.entries(s)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    )
    .join(' or ');
}

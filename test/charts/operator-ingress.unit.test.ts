import type { V1Deployment } from '@kubernetes/client-node';
import { GATEWAY_CLIENT_LABEL } from '../../charts/gateway-chart.js';
import {
  DEFAULT_INGRESS_SOURCES,
  METRICS_SCRAPER_LABEL,
  parseNamespaceSelectors,
  type IngressSources,
  type NamespaceLabels,
} from '../../charts/ingress-sources.js';
import {
  DISCOVERY_DEPLOYMENT_NAME,
  GATEWAY_NAME,
  OPERATOR_NAME,
  OPERATOR_NAMESPACE,
} from '../../charts/names.js';
import { PROXY_CLIENT_LABEL } from '../../charts/network-policy-chart.js';
import { OperatorChart } from '../../charts/operator-chart.js';
import { App } from 'cdk8s';
import { chartObjects, type Manifest } from './manifests.js';

// Who may reach each port of each operator Pod, from every NetworkPolicy of the chart that
// selects it (policies add up; a Pod no policy selects is open to every namespace). The metrics
// port's series name teams and pools: only the monitoring namespaces; the discovery API: only
// the crawlers' namespaces; the gateway: only its clients'. The kubelet's probes come from the
// node, which NetworkPolicy always admits.

/** The manifest's own field names (client-node's model renames `from`). */
interface Policy {
  metadata: { namespace?: string };
  spec: {
    podSelector: { matchLabels?: Record<string, string> };
    ingress?: Array<{
      from?: Array<{ namespaceSelector?: { matchLabels?: Record<string, string> }; podSelector?: unknown }>;
      ports?: Array<{ port: string | number }>;
    }>;
  };
}

/** Per container port name: "anyone", or the namespace selectors admitted (one "k=v,k=v" each), sorted. */
function admitted(objects: readonly Manifest[], deploymentName: string): Record<string, string[] | 'anyone'> {
  const d = objects.find(
    (o) => o.kind === 'Deployment' && o.metadata.name === deploymentName,
  ) as unknown as V1Deployment;
  const labels = d.spec!.template.metadata!.labels!;
  const ports = d.spec!.template.spec!.containers[0].ports!.map((p) => p.name!);
  const policies = (objects.filter((o) => o.kind === 'NetworkPolicy') as unknown as Policy[]).filter(
    (p) =>
      p.metadata.namespace === OPERATOR_NAMESPACE &&
      Object.entries(p.spec.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v),
  );
  const out: Record<string, string[] | 'anyone'> = {};
  for (const port of ports) {
    if (policies.length === 0) {
      out[port] = 'anyone';
      continue;
    }
    const who = new Set<string>();
    let anyone = false;
    for (const rule of policies.flatMap((p) => p.spec.ingress ?? [])) {
      if (rule.ports !== undefined && !rule.ports.some((p) => p.port === port)) continue;
      if (rule.from === undefined || rule.from.length === 0) anyone = true;
      for (const peer of rule.from ?? []) {
        const sel = peer.namespaceSelector?.matchLabels;
        if (sel === undefined || Object.keys(sel).length === 0 || peer.podSelector !== undefined)
          anyone = true;
        else
          who.add(
            Object.entries(sel)
              .map(([k, v]) => `${k}=${v}`)
              .join(','),
          );
      }
    }
    out[port] = anyone ? 'anyone' : [...who].sort();
  }
  return out;
}

const SCRAPERS = [`${METRICS_SCRAPER_LABEL}=true`];
const CRAWLERS = [`${GATEWAY_CLIENT_LABEL}=true`, `${PROXY_CLIENT_LABEL}=true`];
const GATEWAY_CLIENTS = [`${GATEWAY_CLIENT_LABEL}=true`];
const charts = chartObjects();

it.each<[string, string, Record<string, string[]>]>([
  ['operator', OPERATOR_NAME, { metrics: SCRAPERS, discovery: CRAWLERS, gateway: GATEWAY_CLIENTS }],
  ['operator-redis', OPERATOR_NAME, { metrics: SCRAPERS }],
  ['operator-redis', DISCOVERY_DEPLOYMENT_NAME, { metrics: SCRAPERS, discovery: CRAWLERS }],
  ['operator-redis', GATEWAY_NAME, { metrics: SCRAPERS, gateway: GATEWAY_CLIENTS }],
])('%s: the Pods of %s admit, per port, %j (by default)', (chart, deployment, want) => {
  expect(admitted(charts.get(chart)!, deployment)).toEqual(want);
});

it('the defaults are the documented labels: the scrapers, and the crawlers as the Squid Pods and the gateway know them', () => {
  expect(DEFAULT_INGRESS_SOURCES).toEqual({
    monitoring: [{ [METRICS_SCRAPER_LABEL]: 'true' }],
    discoveryClients: [{ [PROXY_CLIENT_LABEL]: 'true' }, { [GATEWAY_CLIENT_LABEL]: 'true' }],
    gatewayClients: [{ [GATEWAY_CLIENT_LABEL]: 'true' }],
  });
});

it('chosen sources replace the defaults in both topologies', () => {
  const ingress = {
    monitoring: [{ 'kubernetes.io/metadata.name': 'monitoring' }],
    discoveryClients: [{ team: 'crawl' }],
    gatewayClients: [{ team: 'crawl', gateway: 'yes' }],
  };
  const custom = chartObjects({ ingress });
  expect(admitted(custom.get('operator')!, OPERATOR_NAME)).toEqual({
    metrics: ['kubernetes.io/metadata.name=monitoring'],
    discovery: ['team=crawl'],
    gateway: ['gateway=yes,team=crawl'],
  });
  expect(admitted(custom.get('operator-redis')!, DISCOVERY_DEPLOYMENT_NAME)).toEqual({
    metrics: ['kubernetes.io/metadata.name=monitoring'],
    discovery: ['team=crawl'],
  });
});

it.each<[string, Partial<IngressSources>, string]>([
  [
    'no monitoring namespace',
    { monitoring: [] },
    'monitoring: an empty namespace selector would admit every namespace',
  ],
  ['an empty crawler selector', { discoveryClients: [{}] }, 'discovery clients: an empty namespace selector'],
  ['no gateway client', { gatewayClients: [] }, 'gateway clients: an empty namespace selector'],
])(
  '%s is refused, naming it: in a NetworkPolicy it would admit every namespace',
  (_what, ingress, message) => {
    expect(
      () => new OperatorChart(new App(), 'x', { ingress: { ...DEFAULT_INGRESS_SOURCES, ...ingress } }),
    ).toThrow(message);
  },
);

it.each<[string, string, NamespaceLabels[] | string]>([
  ['one pair', 'kubernetes.io/metadata.name=monitoring', [{ 'kubernetes.io/metadata.name': 'monitoring' }]],
  ['two selectors, one of two pairs', 'a=1,b=2; c=3', [{ a: '1', b: '2' }, { c: '3' }]],
  ['nothing', ' ; ', 'MONITORING_NAMESPACES: no namespace selector'],
  ['a pair without "="', 'monitoring', 'MONITORING_NAMESPACES: "monitoring" is not label=value'],
  ['an empty label', '=x', 'MONITORING_NAMESPACES: "=x" is not label=value'],
])('parseNamespaceSelectors: %s', (_what, text, want) => {
  if (typeof want === 'string')
    expect(() => parseNamespaceSelectors('MONITORING_NAMESPACES', text)).toThrow(want);
  else expect(parseNamespaceSelectors('MONITORING_NAMESPACES', text)).toEqual(want);
});

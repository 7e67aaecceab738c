// The operator's Prometheus alerts, as data: synthesized into a PrometheusRule
// (dist/monitoring/prometheus-operator.yaml) and a plain rules file
// (dist/monitoring/prometheus-rules.yaml) that promtool checks and tests.
import { METRICS_SERVICE_NAME } from '../names.js';

export type Severity = 'critical' | 'warning' | 'info';

export interface AlertRule {
  alert: string;
  expr: string;
  /** How long the condition must hold before the alert fires (Prometheus duration). */
  for: string;
  severity: Severity;
  summary: string;
  description: string;
}

export interface RuleGroup {
  name: string;
  rules: AlertRule[];
}

/** The job label Prometheus gives the operator's series: the Service's name (the ServiceMonitor's default). */
export const METRICS_JOB = METRICS_SERVICE_NAME;

/**
 * Where the runbooks live; every alert links to its own section. The shipped dist/ says it
 * the one way that is true wherever the repository is hosted: the path of the page beside
 * dist/ in the repository it was synthesized from. A production synth gives the page's
 * absolute address with RUNBOOK_BASE_URL (runbookBaseURL checks it).
 */
export const DEFAULT_RUNBOOK_BASE_URL = 'docs/runbooks.md';

/** Host names that are placeholders, never a page an on-call engineer can open. */
const PLACEHOLDER_HOSTS = /(^|\.)(example\.(com|org|net)|invalid|localhost)$|changeme/i;

/**
 * RUNBOOK_BASE_URL as a synth takes it: absent (or empty) is the repository path; otherwise
 * an absolute http(s) address of docs/runbooks.md (or its copy), without a fragment or a
 * placeholder host such as CHANGEME. Anything else stops the synth naming the setting.
 */
export function runbookBaseURL(raw: string | undefined): string {
  if (raw === undefined || raw.trim() === '') return DEFAULT_RUNBOOK_BASE_URL;
  const value = raw.trim();
  const fail = (why: string) =>
    new Error(
      `RUNBOOK_BASE_URL ${why}, got ${JSON.stringify(value)}: give the address an on-call engineer opens for ` +
        'docs/runbooks.md, e.g. RUNBOOK_BASE_URL=https://github.com/<org>/proxy-operator/blob/main/docs/runbooks.md',
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw fail('must be an absolute http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw fail('must be an http(s) URL');
  if (url.hash !== '') throw fail("must not carry a fragment (each alert adds its section's)");
  if (PLACEHOLDER_HOSTS.test(url.hostname) || /changeme/i.test(url.pathname))
    throw fail('is a placeholder, not a page anyone can open');
  return value.replace(/\/+$/, '');
}

/** The runbook section of an alert: a `## <AlertName>` heading in docs/runbooks.md. */
export function runbookAnchor(alert: string): string {
  return alert.toLowerCase();
}

/** Thresholds a cluster may want to tune; the defaults are what the runbooks explain. */
export interface AlertThresholds {
  /** A pool with fewer than this share of its proxies Ready raises a warning. */
  minHealthyRatio: number;
  /** A proxy Pending or Provisioning longer than this is stuck. */
  stuckProvisioningSeconds: number;
  /** Failed provider calls above this share of an operation's calls. */
  providerErrorRatio: number;
  /** Refused lease requests above this share of all lease requests. */
  refusedLeaseRatio: number;
  /** Cooldowns for one target within 10 minutes above this share of the Ready proxies (the description says "a quarter") ... */
  banStormReadyShare: number;
  /** ... and above this many. */
  banStormMinimum: number;
  /** Status writes per proxy per hour above this are not transition-only any more. */
  statusWritesPerProxyHour: number;
  /** Gateway attempts retried through another upstream above this share of its requests and tunnels. */
  gatewayRetryRatio: number;
}

export const DEFAULT_THRESHOLDS: AlertThresholds = {
  minHealthyRatio: 0.5,
  stuckProvisioningSeconds: 900,
  providerErrorRatio: 0.1,
  refusedLeaseRatio: 0.25,
  banStormReadyShare: 0.25,
  banStormMinimum: 5,
  statusWritesPerProxyHour: 12,
  gatewayRetryRatio: 0.2,
};

/** Every alert, grouped as they are evaluated. */
export function alertGroups(t: AlertThresholds = DEFAULT_THRESHOLDS): RuleGroup[] {
  const job = `job="${METRICS_JOB}"`;
  const pool = 'namespace, attributes';
  const serving = 'proxy_operator_pool_proxies{phase!="Deleting"}';
  const ready = 'proxy_operator_pool_proxies{phase="Ready"}';
  const settled = 'proxy_operator_pool_proxies{phase=~"Ready|Unhealthy|Failed"}';
  return [
    {
      name: 'proxy-operator.fleet',
      rules: [
        {
          alert: 'ProxyPoolNoHealthyProxies',
          // Pools still on their way up (all Pending/Provisioning) are ProxyStuckProvisioning's.
          expr: `sum by (${pool}) (${ready}) == 0 and sum by (${pool}) (${settled}) > 0`,
          for: '2m',
          severity: 'critical',
          summary: 'A proxy pool has no healthy proxy.',
          description:
            'No proxy with attributes "{{ $labels.attributes }}" in namespace {{ $labels.namespace }} is Ready: crawlers selecting them get 409 no_match.',
        },
        {
          alert: 'ProxyPoolFewHealthyProxies',
          expr:
            `sum by (${pool}) (${ready}) / sum by (${pool}) (${serving}) < ${t.minHealthyRatio}` +
            ` and sum by (${pool}) (${ready}) > 0`,
          for: '10m',
          severity: 'warning',
          summary: 'Fewer than half of a proxy pool is healthy.',
          description:
            'Only {{ $value | humanizePercentage }} of the proxies with attributes "{{ $labels.attributes }}" in namespace {{ $labels.namespace }} are Ready.',
        },
        {
          alert: 'ProxyStuckProvisioning',
          expr: `max by (namespace, proxy) (proxy_operator_provisioning_seconds) > ${t.stuckProvisioningSeconds}`,
          for: '1m',
          severity: 'warning',
          summary: 'A proxy has been provisioning for too long.',
          description:
            'Proxy {{ $labels.proxy }} has been Pending or Provisioning for {{ $value | humanizeDuration }}.',
        },
        {
          alert: 'ProxyStatusWritesOverBudget',
          expr:
            `sum(rate(operator_framework_status_writes_total{kind="Proxy"}[30m])) * 3600` +
            ` / (sum(proxy_operator_proxies) > 0) > ${t.statusWritesPerProxyHour}`,
          for: '15m',
          severity: 'warning',
          summary: 'Proxy status is written far more often than transitions explain.',
          description:
            'The operator writes Proxy status {{ $value | humanize }} times per proxy per hour (budget: ' +
            `${t.statusWritesPerProxyHour}): proxies are flapping or a write is not transition-only.`,
        },
      ],
    },
    {
      name: 'proxy-operator.gateway',
      rules: [
        {
          alert: 'ProxyGatewayUpstreamRetryStorm',
          expr:
            'sum(rate(proxy_operator_gateway_upstream_retries_total[5m]))' +
            ' / (sum(rate(proxy_operator_gateway_requests_total[5m])) + sum(rate(proxy_operator_gateway_tunnels_total[5m])))' +
            ` > ${t.gatewayRetryRatio}` +
            ' and (sum(rate(proxy_operator_gateway_requests_total[5m])) + sum(rate(proxy_operator_gateway_tunnels_total[5m]))) > 0.1',
          for: '5m',
          severity: 'warning',
          summary: 'The gateway retries many attempts through another upstream.',
          description:
            '{{ $value | humanizePercentage }} of gateway requests and tunnels needed another upstream: proxies are failing faster than the health engine takes them out.',
        },
      ],
    },
    {
      name: 'proxy-operator.providers',
      rules: [
        {
          alert: 'ProxyProviderErrors',
          expr:
            `sum by (provider, op) (rate(proxy_operator_provider_requests_total{result=~"transient|permanent|quota_exceeded|error"}[10m]))` +
            ` / sum by (provider, op) (rate(proxy_operator_provider_requests_total{result!="aborted"}[10m])) > ${t.providerErrorRatio}`,
          for: '15m',
          severity: 'warning',
          summary: 'A cloud provider keeps failing calls.',
          description:
            '{{ $value | humanizePercentage }} of {{ $labels.op }} calls to provider {{ $labels.provider }} fail.',
        },
        {
          alert: 'ProxyRepairsHeld',
          expr: 'sum by (provider, reason) (proxy_operator_repairs_held) > 0',
          for: '15m',
          severity: 'warning',
          summary: 'Dead-proxy repairs are held: the cause looks shared.',
          description:
            '{{ $value }} proxies of provider {{ $labels.provider }} are kept instead of replaced ({{ $labels.reason }}): the probe target or the way to it is broken, or the provider reports many instances dead at once; not the proxies.',
        },
        {
          alert: 'ProxyOrphansSwept',
          expr: 'sum by (provider) (increase(proxy_operator_orphans_deleted_total[1h])) > 0',
          for: '0m',
          severity: 'warning',
          summary: 'The orphan sweep deleted cloud instances no Proxy owns.',
          description:
            'Provider {{ $labels.provider }}: the sweep deleted instances no live Proxy owns within the last hour (see the operator log, "deleting orphaned instance").',
        },
      ],
    },
    {
      name: 'proxy-operator.discovery',
      rules: [
        {
          alert: 'ProxyLeaseRequestsRefused',
          expr:
            `sum by (outcome) (rate(proxy_operator_lease_requests_total{outcome!~"granted|store_unavailable"}[10m]))` +
            ` / ignoring(outcome) group_left() sum(rate(proxy_operator_lease_requests_total[10m])) > ${t.refusedLeaseRatio}` +
            ` and ignoring(outcome) sum(rate(proxy_operator_lease_requests_total[10m])) > 0.01`,
          for: '10m',
          severity: 'warning',
          summary: 'Many lease requests are refused.',
          description: '{{ $value | humanizePercentage }} of lease requests get 409 {{ $labels.outcome }}.',
        },
        {
          alert: 'ProxyLeaseStoreDown',
          expr: `max by (instance) (proxy_operator_lease_store_up{${job}}) == 0`,
          for: '2m',
          severity: 'critical',
          summary: 'A discovery replica cannot reach the lease store.',
          description:
            '{{ $labels.instance }} cannot reach the lease store: every lease, release and report there answers 503 store_unavailable.',
        },
        {
          alert: 'ProxyLeaseStoreErrors',
          expr: `sum(rate(proxy_operator_lease_requests_total{outcome="store_unavailable"}[5m])) > 0`,
          for: '5m',
          severity: 'warning',
          summary: 'Lease requests are answered 503 store_unavailable.',
          description:
            '{{ $value | printf "%.2f" }} lease requests per second get 503 store_unavailable: the lease store is slow or failing over.',
        },
        {
          alert: 'ProxyDiscoveryTokensFileUnusable',
          expr: 'count(proxy_operator_discovery_tokens_file_usable == 0) > 0',
          for: '5m',
          severity: 'warning',
          summary: 'An edit of the discovery tokens file was refused.',
          description:
            'The tokens file is unreadable or invalid on {{ $value }} replica(s): the edit (a new token, a revocation) is not applied; the tokens before it still are.',
        },
        {
          alert: 'ProxyTargetBanStorm',
          expr:
            'sum by (target) (increase(proxy_operator_target_cooldowns_total[10m]))' +
            ` > on() group_left() clamp_min(${t.banStormReadyShare} * sum(proxy_operator_proxies{phase="Ready"}), ${t.banStormMinimum})`,
          for: '0m',
          severity: 'warning',
          summary: 'One target is banning or rate-limiting many proxies.',
          description:
            'Target {{ $labels.target }} benched more than a quarter of the Ready proxies within 10 minutes: it is blocking the fleet, not a few proxies.',
        },
      ],
    },
    {
      name: 'proxy-operator.operator',
      rules: [
        {
          alert: 'ProxyOperatorDown',
          expr: `up{${job}} == 0`,
          for: '5m',
          severity: 'critical',
          summary: 'The operator does not answer scrapes.',
          description:
            'Prometheus cannot scrape {{ $labels.instance }}: nothing is health-checked or leased there.',
        },
        {
          alert: 'ProxyOperatorNotScraped',
          expr: `absent(up{${job}})`,
          for: '15m',
          severity: 'critical',
          summary: 'Prometheus has no target for the operator.',
          description: `No scrape target with ${job} exists: the ServiceMonitor is not picked up, or the Service has no endpoints.`,
        },
        {
          alert: 'ProxyOperatorNoLeader',
          expr: `max(operator_framework_is_leader{${job}}) < 1`,
          for: '5m',
          severity: 'critical',
          summary: 'No operator replica leads.',
          description: 'Replicas are up but none holds the leader Lease: no proxy is reconciled or probed.',
        },
        {
          alert: 'ProxyOperatorLeaderElectionFailing',
          expr: `sum by (instance, reason) (rate(operator_framework_leader_election_errors_total{${job}}[5m])) > 0`,
          for: '5m',
          severity: 'warning',
          summary: 'Leader election keeps failing.',
          description:
            '{{ $labels.instance }} cannot acquire or renew the leader Lease: {{ $labels.reason }}.',
        },
      ],
    },
  ];
}

/** Prometheus rules file / PrometheusRule `spec.groups` shape. */
export function ruleGroupsSpec(
  runbookBaseURL: string = DEFAULT_RUNBOOK_BASE_URL,
  groups: RuleGroup[] = alertGroups(),
): Array<{ name: string; rules: Array<Record<string, unknown>> }> {
  return groups.map((g) => ({
    name: g.name,
    rules: g.rules.map((r) => ({
      alert: r.alert,
      expr: r.expr,
      for: r.for,
      labels: { severity: r.severity },
      annotations: {
        summary: r.summary,
        description: r.description,
        runbook_url: `${runbookBaseURL}#${runbookAnchor(r.alert)}`,
      },
    })),
  }));
}

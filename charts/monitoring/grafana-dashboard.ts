// The operator's Grafana dashboard (dist/monitoring/grafana-dashboard.json, and a ConfigMap
// for the Grafana sidecar): the fleet, probes, leases, targets, providers, the control loop.
import { METRICS_JOB } from './alert-rules.js';

export interface PanelQuery {
  expr: string;
  legendFormat: string;
}

export interface PanelSpec {
  title: string;
  description: string;
  unit: string;
  queries: PanelQuery[];
}

export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

export const DASHBOARD_UID = 'proxy-operator';
/** Every panel reads from the data source the viewer picks. */
export const DATASOURCE_VARIABLE = 'datasource';

const job = `job="${METRICS_JOB}"`;
const rate = (series: string) => `rate(${series}[$__rate_interval])`;

/** The panels, row by row: what an SRE looks at when an alert fires. */
export const DASHBOARD_ROWS: RowSpec[] = [
  {
    title: 'Fleet',
    panels: [
      {
        title: 'Proxies by phase',
        description: 'Every Proxy by status.phase (proxy_operator_proxies).',
        unit: 'short',
        queries: [{ expr: 'sum by (phase) (proxy_operator_proxies)', legendFormat: '{{phase}}' }],
      },
      {
        title: 'Healthy share per pool',
        description:
          'Ready proxies over all (not deleting) proxies, per namespace and attribute set: what ProxyPoolFewHealthyProxies watches.',
        unit: 'percentunit',
        queries: [
          {
            expr:
              'sum by (namespace, attributes) (proxy_operator_pool_proxies{phase="Ready"})' +
              ' / sum by (namespace, attributes) (proxy_operator_pool_proxies{phase!="Deleting"})',
            legendFormat: '{{namespace}} {{attributes}}',
          },
        ],
      },
      {
        title: 'Provisioning time of proxies on their way',
        description: 'Seconds each Pending/Provisioning proxy has waited (ProxyStuckProvisioning at 15 min).',
        unit: 's',
        queries: [
          { expr: 'max by (proxy) (proxy_operator_provisioning_seconds)', legendFormat: '{{proxy}}' },
        ],
      },
    ],
  },
  {
    title: 'Health probes',
    panels: [
      {
        title: 'Probe latency',
        description: 'Duration of probes sent through the proxies, all proxies together.',
        unit: 's',
        queries: [0.5, 0.95, 0.99].map((q) => ({
          expr: `histogram_quantile(${q}, sum by (le) (${rate('proxy_operator_healthcheck_duration_seconds_bucket')}))`,
          legendFormat: `p${q * 100}`,
        })),
      },
      {
        title: 'Slowest proxies (p90)',
        description: 'The ten proxies with the highest p90 probe latency.',
        unit: 's',
        queries: [
          {
            expr: `topk(10, histogram_quantile(0.9, sum by (proxy, le) (${rate('proxy_operator_healthcheck_duration_seconds_bucket')})))`,
            legendFormat: '{{proxy}}',
          },
        ],
      },
      {
        title: 'Failed probes by reason',
        description: 'Failed probes per second by the Healthy condition reason they set.',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (reason) (${rate('proxy_operator_healthcheck_failures_total')})`,
            legendFormat: '{{reason}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Leases',
    panels: [
      {
        title: 'Lease requests by outcome',
        description: 'Granted, or the 409 reason (no_match, all_busy, all_cooling_down).',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (outcome) (${rate('proxy_operator_lease_requests_total')})`,
            legendFormat: '{{outcome}}',
          },
        ],
      },
      {
        title: 'Active leases and sessions',
        description: 'Leases held by clients and sticky sessions bound to a proxy.',
        unit: 'short',
        queries: [
          { expr: 'sum(proxy_operator_leases_active)', legendFormat: 'leases' },
          { expr: 'sum(proxy_operator_sessions_active)', legendFormat: 'sessions' },
        ],
      },
      {
        title: 'Reports by result',
        description: 'What crawlers report about their leases: ok, banned, rate_limited.',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (result) (${rate('proxy_operator_lease_reports_total')})`,
            legendFormat: '{{result}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Targets',
    panels: [
      {
        title: 'Cooldowns started by target (last hour)',
        description:
          'Cooldowns started or extended by banned/rate_limited reports, top ten targets: a tall bar is a ban storm.',
        unit: 'short',
        queries: [
          {
            expr: 'topk(10, sum by (target) (increase(proxy_operator_target_cooldowns_total[1h])))',
            legendFormat: '{{target}}',
          },
        ],
      },
      {
        title: 'Running cooldowns',
        description: '(proxy, target) pairs benched right now.',
        unit: 'short',
        queries: [{ expr: 'sum(proxy_operator_cooldowns_active)', legendFormat: 'cooldowns' }],
      },
    ],
  },
  {
    title: 'Providers',
    panels: [
      {
        title: 'Provider calls',
        description: 'Calls to cloud providers by provider, operation and result.',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (provider, op, result) (${rate('proxy_operator_provider_requests_total')})`,
            legendFormat: '{{provider}} {{op}} {{result}}',
          },
        ],
      },
      {
        title: 'Provider errors',
        description: 'Failed calls (transient, permanent, quota_exceeded, error) by provider and operation.',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (provider, op) (${rate('proxy_operator_provider_requests_total{result=~"transient|permanent|quota_exceeded|error"}')})`,
            legendFormat: '{{provider}} {{op}}',
          },
        ],
      },
    ],
  },
  {
    title: 'Control loop',
    panels: [
      {
        title: 'Reconciles by result',
        description: 'Handler runs per second by kind and result.',
        unit: 'reqps',
        queries: [
          {
            expr: `sum by (kind, result) (${rate('operator_framework_reconciles_total')})`,
            legendFormat: '{{kind}} {{result}}',
          },
        ],
      },
      {
        title: 'Reconcile duration (p95)',
        description: 'How long one dispatch of an object to its handlers takes.',
        unit: 's',
        queries: [
          {
            expr: `histogram_quantile(0.95, sum by (kind, le) (${rate('operator_framework_reconcile_duration_seconds_bucket')}))`,
            legendFormat: '{{kind}}',
          },
        ],
      },
      {
        title: 'Status writes',
        description: 'Status writes per second by kind: transition-only, so near zero on a steady fleet.',
        unit: 'wps',
        queries: [
          {
            expr: `sum by (kind) (${rate('operator_framework_status_writes_total')})`,
            legendFormat: '{{kind}}',
          },
        ],
      },
      {
        title: 'Leader',
        description: '1 for the replica holding the leader Lease.',
        unit: 'short',
        queries: [
          { expr: `max by (instance) (operator_framework_is_leader{${job}})`, legendFormat: '{{instance}}' },
        ],
      },
    ],
  },
  {
    title: 'Process',
    panels: [
      {
        title: 'Memory',
        description:
          'Resident set and V8 heap of each replica (the container limit is in charts/operator-chart.ts).',
        unit: 'bytes',
        queries: [
          { expr: `process_resident_memory_bytes{${job}}`, legendFormat: '{{instance}} RSS' },
          { expr: `nodejs_heap_size_used_bytes{${job}}`, legendFormat: '{{instance}} heap used' },
        ],
      },
      {
        title: 'CPU',
        description: 'CPU seconds per second of each replica.',
        unit: 'percentunit',
        queries: [{ expr: `${rate(`process_cpu_seconds_total{${job}}`)}`, legendFormat: '{{instance}}' }],
      },
    ],
  },
];

/** Every PromQL query of the dashboard (the integration test runs each against a real Prometheus). */
export function dashboardQueries(rows: RowSpec[] = DASHBOARD_ROWS): string[] {
  return rows.flatMap((r) => r.panels.flatMap((p) => p.queries.map((q) => q.expr)));
}

/** The dashboard as Grafana's JSON model (schemaVersion 39), with a `${datasource}` variable. */
export function grafanaDashboard(rows: RowSpec[] = DASHBOARD_ROWS): Record<string, unknown> {
  const datasource = { type: 'prometheus', uid: `\${${DATASOURCE_VARIABLE}}` };
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows) {
    panels.push({
      id: id++,
      type: 'row',
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
    });
    y += 1;
    const width = Math.floor(24 / row.panels.length);
    row.panels.forEach((panel, i) => {
      panels.push({
        id: id++,
        type: 'timeseries',
        title: panel.title,
        description: panel.description,
        datasource,
        gridPos: { h: 8, w: width, x: i * width, y },
        fieldConfig: { defaults: { unit: panel.unit }, overrides: [] },
        options: { legend: { displayMode: 'list', placement: 'bottom', showLegend: true } },
        targets: panel.queries.map((q, j) => ({
          refId: String.fromCharCode(65 + j),
          datasource,
          expr: q.expr,
          legendFormat: q.legendFormat,
        })),
      });
    });
    y += 8;
  }
  return {
    uid: DASHBOARD_UID,
    title: 'proxy-operator',
    description: 'The proxy fleet, its health probes, leases, targets, cloud providers and the control loop.',
    tags: ['proxy-operator'],
    editable: true,
    schemaVersion: 39,
    version: 1,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    timezone: 'browser',
    templating: {
      list: [
        {
          name: DATASOURCE_VARIABLE,
          label: 'Data source',
          type: 'datasource',
          query: 'prometheus',
          current: {},
          hide: 0,
          refresh: 1,
        },
      ],
    },
    annotations: { list: [] },
    panels,
  };
}

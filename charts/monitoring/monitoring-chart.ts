import { ApiObject, Chart } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import type { Construct } from 'constructs';
import { APP_LABELS, METRICS_COMPONENT_LABELS, OPERATOR_NAMESPACE } from '../names.js';
import { DEFAULT_RUNBOOK_BASE_URL, ruleGroupsSpec } from './alert-rules.js';
import { grafanaDashboard } from './grafana-dashboard.js';

export const PROMETHEUS_RULE_NAME = 'proxy-operator';
export const SERVICE_MONITOR_NAME = 'proxy-operator';
export const DASHBOARD_CONFIGMAP_NAME = 'proxy-operator-dashboard';
export const DASHBOARD_FILE = 'proxy-operator.json';
/** The label kube-prometheus-stack's Grafana sidecar looks for on dashboard ConfigMaps. */
export const GRAFANA_DASHBOARD_LABEL = { grafana_dashboard: '1' } as const;

export interface MonitoringChartProps {
  runbookBaseURL?: string;
}

/**
 * dist/monitoring/prometheus-operator.yaml: the PrometheusRule, the ServiceMonitor and the
 * dashboard ConfigMap. Kept out of dist/kustomization.yaml: a cluster without the Prometheus
 * Operator's CRDs would reject the whole `kubectl apply -k dist/` over them.
 */
export class MonitoringChart extends Chart {
  constructor(scope: Construct, id: string, props: MonitoringChartProps = {}) {
    super(scope, id, { labels: APP_LABELS });
    new ApiObject(this, 'prometheus-rule', {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'PrometheusRule',
      metadata: { name: PROMETHEUS_RULE_NAME, namespace: OPERATOR_NAMESPACE },
      spec: { groups: ruleGroupsSpec(props.runbookBaseURL ?? DEFAULT_RUNBOOK_BASE_URL) },
    });
    new ApiObject(this, 'service-monitor', {
      apiVersion: 'monitoring.coreos.com/v1',
      kind: 'ServiceMonitor',
      metadata: { name: SERVICE_MONITOR_NAME, namespace: OPERATOR_NAMESPACE },
      spec: {
        selector: { matchLabels: { ...APP_LABELS, ...METRICS_COMPONENT_LABELS } },
        namespaceSelector: { matchNames: [OPERATOR_NAMESPACE] },
        endpoints: [{ port: 'metrics', path: '/metrics', interval: '30s' }],
      },
    });
    new kplus.ConfigMap(this, 'dashboard', {
      metadata: {
        name: DASHBOARD_CONFIGMAP_NAME,
        namespace: OPERATOR_NAMESPACE,
        labels: { ...GRAFANA_DASHBOARD_LABEL },
      },
      data: { [DASHBOARD_FILE]: `${JSON.stringify(grafanaDashboard(), null, 2)}\n` },
    });
  }
}

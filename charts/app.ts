import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, YamlOutputType } from 'cdk8s';
import { stringify } from 'yaml';
import { CrdChart } from './crd-chart.js';
import { ruleGroupsSpec, runbookBaseURL } from './monitoring/alert-rules.js';
import { grafanaDashboard } from './monitoring/grafana-dashboard.js';
import { MonitoringChart } from './monitoring/monitoring-chart.js';
import { DEFAULT_INGRESS_SOURCES, type IngressSources } from './ingress-sources.js';
import { NetworkPolicyChart } from './network-policy-chart.js';
import { OperatorChart } from './operator-chart.js';
import { REDIS_SAMPLE_URL } from './names.js';
import { RedisSampleChart } from './redis-sample-chart.js';
import { SamplesChart } from './samples-chart.js';

/** Each chart is written to <outdir>/<chart id>.yaml: `crds` → dist/crds.yaml. */
export const CHART_FILE_EXTENSION = '.yaml';

/** The charts a GitOps tool deploys, in apply order; samples are for trying things out, not deploying. */
export const DEPLOYED_CHARTS = ['crds', 'operator', 'network-policy'] as const;
export const SAMPLES_CHART = 'samples';
/**
 * The Redis lease store's alternative to the operator chart (apply one or the other): the
 * controller and a scaled-out discovery Deployment sharing the book in Redis, pointed at the
 * kind quickstart's Redis (REDIS_SAMPLE_URL; edit --redis-url for another).
 */
export const OPERATOR_REDIS_CHART = 'operator-redis';
export const REDIS_SAMPLE_CHART = 'redis-sample';
export const KUSTOMIZATION_FILE = 'kustomization.yaml';
/**
 * dist/monitoring/: what needs a Prometheus (Operator) and Grafana, apart from the deployed
 * charts so `kubectl apply -k dist/` never meets a kind the cluster lacks.
 */
export const MONITORING_DIR = 'monitoring';
/** The PrometheusRule, ServiceMonitor and dashboard ConfigMap (needs the Prometheus Operator's CRDs). */
export const MONITORING_CHART = 'prometheus-operator';
/** The same alerts as a plain Prometheus rules file (rule_files:, promtool). */
export const RULES_FILE = 'prometheus-rules.yaml';
/** The dashboard for Grafana's "Import dashboard". */
export const DASHBOARD_FILE = 'grafana-dashboard.json';

export interface AppOptions {
  /** The operator image; `npm run synth` takes it from $IMAGE. */
  image?: string;
  /**
   * The absolute address of docs/runbooks.md the alerts' runbook_url points at; `npm run synth`
   * takes it from $RUNBOOK_BASE_URL (checked by runbookBaseURL; absent: the repository path).
   */
  runbookBaseURL?: string;
  /** The operator's --watch-namespace and its Roles' namespace; `npm run synth` takes it from $WATCH_NAMESPACE. */
  watchNamespace?: string;
  /**
   * Who may reach the operator's metrics, discovery and gateway ports (ingress-sources.ts);
   * `npm run synth` takes each from $MONITORING_NAMESPACES, $DISCOVERY_CLIENT_NAMESPACES and
   * $GATEWAY_CLIENT_NAMESPACES. Unset parts keep DEFAULT_INGRESS_SOURCES.
   */
  ingress?: Partial<IngressSources>;
}

/** Every chart of the deployment. */
export function buildApp(outdir: string, options: AppOptions = {}): App {
  const app = new App({
    outdir,
    outputFileExtension: CHART_FILE_EXTENSION,
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
  });
  const [crds, operator, networkPolicy] = DEPLOYED_CHARTS;
  new CrdChart(app, crds);
  const ingress = { ...DEFAULT_INGRESS_SOURCES, ...options.ingress };
  new OperatorChart(app, operator, { image: options.image, watchNamespace: options.watchNamespace, ingress });
  new NetworkPolicyChart(app, networkPolicy);
  new SamplesChart(app, SAMPLES_CHART);
  new OperatorChart(app, OPERATOR_REDIS_CHART, {
    image: options.image,
    watchNamespace: options.watchNamespace,
    ingress,
    leaseStore: { kind: 'redis', url: REDIS_SAMPLE_URL },
  });
  new RedisSampleChart(app, REDIS_SAMPLE_CHART);
  return app;
}

/** `kubectl apply -k dist/`: the deployed charts only. */
export function kustomizationYaml(): string {
  return stringify({
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: DEPLOYED_CHARTS.map((c) => `${c}${CHART_FILE_EXTENSION}`),
  });
}

/** The monitoring chart, in its own app: it is written to <outdir>/monitoring/. */
export function buildMonitoringApp(outdir: string, options: AppOptions = {}): App {
  const app = new App({
    outdir,
    outputFileExtension: CHART_FILE_EXTENSION,
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
  });
  new MonitoringChart(app, MONITORING_CHART, { runbookBaseURL: options.runbookBaseURL });
  return app;
}

/** Writes every chart and the kustomization into `outdir`: what `npm run synth` does. */
export function synthesize(outdir: string, given: AppOptions = {}): void {
  // A bad RUNBOOK_BASE_URL stops the synth before it writes anything.
  const options = { ...given, runbookBaseURL: runbookBaseURL(given.runbookBaseURL) };
  buildApp(outdir, options).synth();
  writeFileSync(join(outdir, KUSTOMIZATION_FILE), kustomizationYaml());
  const monitoring = join(outdir, MONITORING_DIR);
  mkdirSync(monitoring, { recursive: true });
  buildMonitoringApp(monitoring, options).synth();
  writeFileSync(
    join(monitoring, RULES_FILE),
    stringify({ groups: ruleGroupsSpec(options.runbookBaseURL) }, { lineWidth: 0 }),
  );
  writeFileSync(join(monitoring, DASHBOARD_FILE), `${JSON.stringify(grafanaDashboard(), null, 2)}\n`);
}

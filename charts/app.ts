import { App, YamlOutputType } from 'cdk8s';
import { CrdChart } from './crd-chart.js';

/** Each chart is written to <outdir>/<chart id>.yaml: `crds` → dist/crds.yaml. */
export const CHART_FILE_EXTENSION = '.yaml';

/** Every chart of the deployment; add new charts here (e.g. RBAC, the operator Deployment). */
export function buildApp(outdir: string): App {
  const app = new App({
    outdir,
    outputFileExtension: CHART_FILE_EXTENSION,
    yamlOutputType: YamlOutputType.FILE_PER_CHART,
  });
  new CrdChart(app, 'crds');
  return app;
}

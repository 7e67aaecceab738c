import { synthesize } from './app.js';
import { parseNamespaceSelectors } from './ingress-sources.js';

// `npm run synth`: writes one YAML file per chart into dist/ (or the folder given as argument).
// npm runs scripts from the package root, so the relative default lands in the repository's dist/.
// IMAGE overrides the operator image, e.g. IMAGE=registry.example.com/proxy-operator:1.2.3.
// WATCH_NAMESPACE is the namespace of your Proxies: the operator's --watch-namespace and where
// its Secret, Proxy and Event Roles are bound (default: default).
// RUNBOOK_BASE_URL: the absolute address of docs/runbooks.md the alerts' runbook links point
// at (a production synth gives it; without it they name the page's path in this repository).
// MONITORING_NAMESPACES, DISCOVERY_CLIENT_NAMESPACES, GATEWAY_CLIENT_NAMESPACES: who may reach
// the metrics, discovery and gateway ports, as `label=value[,label=value]` selectors separated
// by `;` (docs/deploying.md#who-may-reach-the-operators-ports; defaults: charts/ingress-sources.ts).
const selectors = (name: string) => {
  const text = process.env[name];
  return text ? parseNamespaceSelectors(name, text) : undefined;
};
const ingress = Object.fromEntries(
  Object.entries({
    monitoring: selectors('MONITORING_NAMESPACES'),
    discoveryClients: selectors('DISCOVERY_CLIENT_NAMESPACES'),
    gatewayClients: selectors('GATEWAY_CLIENT_NAMESPACES'),
  }).filter(([, v]) => v !== undefined),
);
synthesize(process.argv[2] ?? 'dist', {
  ingress,
  image: process.env.IMAGE || undefined,
  runbookBaseURL: process.env.RUNBOOK_BASE_URL || undefined,
  watchNamespace: process.env.WATCH_NAMESPACE || undefined,
});

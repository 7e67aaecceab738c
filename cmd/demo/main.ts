import 'reflect-metadata';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { DEMO_USAGE, demoArgs } from './args.js';
import { startDemoEnvironment } from './environment.js';
import { authFlag, runDemoFlow } from './flow.js';
import { interrupted } from '../interrupted.js';

// `npm run demo`: the whole product on this machine, no cluster and no cloud.
// --no-wait runs the flow and exits (the end-to-end test and CI use it).
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const args = demoArgs(process.argv.slice(2));
if (args.kind === 'help') {
  process.stdout.write(`${DEMO_USAGE}\n`);
  process.exit(0);
}
if (args.kind === 'error') {
  process.stderr.write(`demo: ${args.message}\n\n${DEMO_USAGE}\n`);
  process.exit(2);
}
const { wait, kind: _kind, ...options } = args;
const print = (line: string) => process.stdout.write(`${line}\n`);
const progress = (line: string) => process.stderr.write(`[demo] ${line}\n`);
// Operator logs go to a file-like quiet level so the walkthrough stays readable.
const logger = pino({ level: process.env.LOG_LEVEL ?? 'warn' }, pino.destination(2));

progress('starting a local control plane (the first run builds kube-apiserver and etcd: minutes)');
const env = await startDemoEnvironment({
  root,
  logger,
  progress,
  discoveryPort: 8090,
  sitePort: 8091,
  gatewayPort: 8888,
  options,
});
let exitCode = 0;
try {
  const kubectl = env.controlPlane.binaries.kubectl ?? 'kubectl';
  await runDemoFlow(env, print, kubectl);
  if (wait) {
    print('\n== Your turn ==');
    print(`$ export KUBECONFIG=${env.controlPlane.kubeconfigPath}`);
    print(`$ ${kubectl} get px`);
    print(`$ ${kubectl} describe px demo-managed`);
    print(
      `$ curl -s${authFlag(env)} '${env.discoveryURL}/v1/proxies?healthy=true' ; curl -s ${env.metricsURL}/metrics | grep proxy_operator_`,
    );
    if (options.token !== undefined)
      print(
        `(--token: the discovery API and the gateway answer 401/407 without 'Authorization: Bearer ${options.token}')`,
      );
    if (options.site)
      print(
        `The strict site ${env.site.url} answers 403 to demo-external's exit and 429 (Retry-After) above ${options.site.ratePerSecond} requests per second per exit: test your client's ban and rate-limit handling against it.`,
      );
    print(
      `Crawl ${env.site.url} through the proxies: the Crawlee recipe (docs/crawling.md, "Crawlee")${options.token === undefined ? '' : ` with DISCOVERY_TOKEN=${options.token}`}.`,
    );
    print('Press Ctrl-C to stop and clean everything up.');
    await interrupted();
  }
} catch (err) {
  exitCode = 1;
  process.stderr.write(`demo failed: ${(err as Error).stack ?? String(err)}\n`);
} finally {
  progress('cleaning up');
  await env.close();
}
process.exit(exitCode);

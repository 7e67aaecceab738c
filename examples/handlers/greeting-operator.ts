// Wiring the example handlers into an Operator (docs/framework.md, "Running it").
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { container } from 'tsyringe';
import { Operator } from '../../framework/index.js';
import { GreetingCensus } from './greeting-census.js';
import { GREETING_SETTINGS, GreetingController, type GreetingSettings } from './greeting-controller.js';
import { GROUP } from './greeting-kind.js';

// #region operator
export function greetingOperator(opts: {
  kubeConfig: KubeConfig;
  logger: Logger;
  registry: Registry;
  settings: GreetingSettings;
  namespace?: string;
}): Operator {
  const scope = container.createChildContainer(); // one per Operator: nothing shared
  scope.register(GREETING_SETTINGS, { useValue: opts.settings });
  return new Operator({
    kubeConfig: opts.kubeConfig,
    container: scope,
    logger: opts.logger,
    registry: opts.registry,
    handlers: [GreetingController, GreetingCensus],
    stateAnnotationPrefix: GROUP, // → examples.framework.example.com/last-handled-generation
    leaderElection: false, // or { namespace, name }: handlers then run on the leader only
    namespace: opts.namespace,
  });
}
// Then: await operator.start(); operator.installSignalHandlers();
// #endregion operator

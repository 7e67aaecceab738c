import 'reflect-metadata';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { container } from 'tsyringe';
import { controller, onDelete, Operator, type OperatorOptions } from '../../framework/index.js';
import { LeaderElector } from '../../framework/core/leader-election.js';
import { KubeClient } from '../../framework/utils/kube-client.js';

const WIDGET = {
  group: 'test.example.com',
  version: 'v1',
  plural: 'widgets',
  kind: 'Widget',
  namespaced: true,
};

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

function options(
  handlers: OperatorOptions['handlers'],
  extra: Partial<OperatorOptions> = {},
): OperatorOptions {
  return {
    kubeConfig: kubeConfig(),
    container: container.createChildContainer(),
    logger: pino({ level: 'silent' }),
    registry: new Registry(),
    handlers,
    stateAnnotationPrefix: 'test.example.com',
    ...extra,
  };
}

describe('Operator configuration errors', () => {
  class Undecorated {}

  @controller({ ...WIDGET })
  class NeedsFinalizer {
    @onDelete() async cleanup() {}
  }

  @controller({ ...WIDGET, finalizer: 'test.example.com/x' })
  class First {}
  @controller({ ...WIDGET, finalizer: 'test.example.com/y' })
  class Second {}

  it.each([
    [
      'an undecorated handler class',
      options([Undecorated]),
      /Undecorated is decorated with neither @controller nor @background/,
    ],
    [
      'a non-optional @onDelete without a finalizer',
      options([NeedsFinalizer]),
      /needs the "finalizer" option/,
    ],
    [
      'two controllers for one kind',
      options([First, Second]),
      /two @controller classes for widgets.test.example.com\/v1/,
    ],
    [
      'an empty annotation prefix',
      options([First], { stateAnnotationPrefix: '' }),
      /stateAnnotationPrefix must be/,
    ],
    [
      'inconsistent lease timings',
      options([First], {
        leaderElection: { namespace: 'ns', name: 'l', leaseDurationSeconds: 5, renewDeadlineSeconds: 10 },
      }),
      /leaseDurationSeconds > renewDeadlineSeconds > retryPeriodSeconds/,
    ],
  ])('rejects %s', (_what, opts, message) => {
    expect(() => new Operator(opts)).toThrow(message);
  });

  it('accepts a valid configuration without contacting the API server', () => {
    expect(() => new Operator(options([First]))).not.toThrow();
  });

  it('defaults lease timings to 15/10/2 seconds', () => {
    const logger = pino({ level: 'silent' });
    const noop = { onStartedLeading() {}, onStoppedLeading() {} };
    expect(
      () => new LeaderElector(new KubeClient(kubeConfig()), { namespace: 'ns', name: 'l' }, noop, logger),
    ).not.toThrow();
  });
});

// Test-only fixtures for the framework's integration suites: a throw-away Widget CRD, a
// namespace per suite, and an Operator factory with short timings.
import { eventually as pollUntil } from '../../framework/testing/index.js';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import {
  Operator,
  type HandlerClass,
  type KindRef,
  type KubeObject,
  type OperatorOptions,
} from '../../framework/index.js';
import { isStatus, KubeClient, MERGE_PATCH } from '../../framework/utils/kube-client.js';
import { schemalessCrd } from '../../framework/testing/schemaless-crd.js';
import { uniqueName } from '../harness/kube.js';

export const GROUP = 'test.framework.example.com';
export const WIDGET: KindRef = {
  group: GROUP,
  version: 'v1',
  plural: 'widgets',
  kind: 'Widget',
  namespaced: true,
};
export const CONFIGMAP: KindRef = {
  group: '',
  version: 'v1',
  plural: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
};
export const FINALIZER = `${GROUP}/cleanup`;
export const HANDLED = `${GROUP}/last-handled-generation`;

export interface Widget extends KubeObject {
  spec: { size?: number; skip?: boolean; fail?: string; interval?: number };
  status?: Record<string, unknown>;
}

export function testLogger(): Logger {
  // FRAMEWORK_TEST_LOG=debug shows the operator's JSON logs while debugging a suite.
  return pino({ level: process.env.FRAMEWORK_TEST_LOG ?? 'silent' });
}

/** Retries `check` until it stops throwing; past the deadline its last error is the test's. */
export function eventually<T>(check: () => T | Promise<T>, timeoutMs = 30_000, intervalMs = 100): Promise<T> {
  return pollUntil('a check to pass', async () => ({ value: await check() }), { timeoutMs, intervalMs }).then(
    (r) => r.value,
  );
}

const CRD = schemalessCrd(WIDGET);

/** One suite's view of the cluster: the Widget CRD (shared, created once) and its own namespace. */
export class WidgetWorld {
  readonly client: KubeClient;

  private constructor(
    readonly kubeConfig: KubeConfig,
    readonly namespace: string,
  ) {
    this.client = new KubeClient(kubeConfig);
  }

  static async create(kubeConfig: KubeConfig, prefix: string): Promise<WidgetWorld> {
    const world = new WidgetWorld(kubeConfig, uniqueName(prefix));
    const c = world.client;
    try {
      await c.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: CRD });
    } catch (err) {
      if (!isStatus(err, 409)) throw err;
    }
    await c.request('POST', '/api/v1/namespaces', { body: { metadata: { name: world.namespace } } });
    // Served once the CRD is established; listing proves it.
    await eventually(() => c.request('GET', `/apis/${GROUP}/v1/namespaces/${world.namespace}/widgets`));
    return world;
  }

  private path(name?: string, sub?: string): string {
    return `/apis/${GROUP}/v1/namespaces/${this.namespace}/widgets${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;
  }

  createWidget(name: string, spec: Widget['spec'] = {}, labels?: Record<string, string>): Promise<Widget> {
    return this.client.request('POST', this.path(), {
      body: { apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name, labels }, spec },
    });
  }

  patchSpec(name: string, spec: Widget['spec']): Promise<Widget> {
    return this.client.request('PATCH', this.path(name), { body: { spec }, contentType: MERGE_PATCH });
  }

  /** Merge-patches metadata.annotations (null removes one), as a person with kubectl would. */
  patchAnnotations(name: string, annotations: Record<string, string | null>): Promise<Widget> {
    return this.client.request('PATCH', this.path(name), {
      body: { metadata: { annotations } },
      contentType: MERGE_PATCH,
    });
  }

  patchStatus(name: string, status: Record<string, unknown>): Promise<Widget> {
    return this.client.request('PATCH', this.path(name, 'status'), {
      body: { status },
      contentType: MERGE_PATCH,
    });
  }

  deleteWidget(name: string): Promise<unknown> {
    return this.client.request('DELETE', this.path(name));
  }

  getWidget(name: string): Promise<Widget> {
    return this.client.request('GET', this.path(name));
  }

  async gone(name: string): Promise<void> {
    try {
      await this.getWidget(name);
    } catch (err) {
      if (isStatus(err, 404)) return;
      throw err;
    }
    throw new Error(`widget ${name} still exists`);
  }

  async events(name: string): Promise<Array<{ type: string; reason: string; message: string }>> {
    const list = await this.client.request<{
      items: Array<{ type: string; reason: string; message: string }>;
    }>('GET', `/api/v1/namespaces/${this.namespace}/events`, {
      query: { fieldSelector: `involvedObject.name=${name}` },
    });
    return list.items;
  }

  createConfigMap(
    name: string,
    data: Record<string, string>,
    labels?: Record<string, string>,
  ): Promise<KubeObject> {
    return this.client.request('POST', `/api/v1/namespaces/${this.namespace}/configmaps`, {
      body: { metadata: { name, labels }, data },
    });
  }

  patchConfigMap(name: string, data: Record<string, string>): Promise<KubeObject> {
    return this.client.request('PATCH', `/api/v1/namespaces/${this.namespace}/configmaps/${name}`, {
      body: { data },
      contentType: MERGE_PATCH,
    });
  }

  /** An Operator scoped to this namespace with test-friendly timings. */
  operator(
    handlers: HandlerClass[],
    setup: (c: DependencyContainer) => void = () => {},
    overrides: Partial<OperatorOptions> = {},
  ): Operator {
    const container = rootContainer.createChildContainer();
    setup(container);
    return new Operator({
      kubeConfig: this.kubeConfig,
      container,
      logger: testLogger(),
      registry: new Registry(),
      handlers,
      namespace: this.namespace,
      stateAnnotationPrefix: GROUP,
      shutdownGraceSeconds: 5,
      queue: { backoffBaseMs: 200, backoffMaxMs: 5_000 },
      ...overrides,
    });
  }
}

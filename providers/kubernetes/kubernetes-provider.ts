import 'reflect-metadata';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { inject } from 'tsyringe';
import { AbortableProvider } from '../abortable-provider.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_UID, type CreateRequest, type Instance } from '../contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  providerError,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../errors.js';
import {
  PROVIDER_KUBECONFIG,
  PROVIDER_LOGGER,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
} from '../provider-class.js';
import { parseKubernetesConfig, type KubernetesSettings } from './config.js';
import { classifyKubeError, messageOf, statusOf, type KubeErrorMeaning } from './error-mapping.js';
import { buildPod } from './pod-spec.js';
import { toInstance, type PodViewOptions } from './pod-view.js';
import { withRequestSignal } from './request-options.js';

/** The label selector for one owner's managed Pods. */
export function ownedSelector(owner: string): string {
  return `${LABEL_MANAGED}=true,${LABEL_OWNER}=${owner}`;
}

/**
 * Proxies as Squid Pods in one namespace (local development and CI: no cloud account).
 * providerID = "<namespace>/<pod name>". An aborted signal cancels the HTTP request.
 */
@provider({ type: 'kubernetes', config: parseKubernetesConfig })
export class KubernetesProvider extends AbortableProvider {
  /** The only provider that talks to Kubernetes, through the core API. */
  private readonly core: CoreV1Api;

  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: KubernetesSettings,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
    @inject(PROVIDER_KUBECONFIG) kubeConfig: KubeConfig,
  ) {
    super();
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  protected async doCreate(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535) {
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    }
    const pod = buildPod(req, this.settings);
    const namespace = this.settings.namespace;
    const name = pod.metadata!.name!;
    const id = `${namespace}/${name}`;
    try {
      await this.core.createNamespacedPod({ namespace, body: pod }, withRequestSignal(signal));
      this.logger.info({ providerID: id, proxy: req.proxy }, 'proxy pod created');
      return id;
    } catch (err) {
      if (statusOf(err) === 404) {
        throw new ProviderPermanentError(`namespace "${namespace}" does not exist`, {
          ...this.ctx('create', id),
          cause: err,
        });
      }
      const meaning = classifyKubeError(err, 'create');
      if (meaning !== 'AlreadyExists') throw this.mapped(meaning, err, 'create', id);
    }
    // The name derives from the UID: an existing Pod is ours, unless a hash collision says otherwise.
    const existing = await this.read(namespace, name, 'create', id, signal);
    const owner = existing.metadata?.labels?.[LABEL_UID];
    if (owner !== req.uid) {
      throw new ProviderPermanentError(
        `pod ${id} already exists for another Proxy (uid ${owner ?? 'none'})`,
        this.ctx('create', id),
      );
    }
    return id;
  }

  protected async doGet(providerID: string, signal?: AbortSignal): Promise<Instance> {
    const { namespace, name } = this.ref(providerID, 'get');
    return toInstance(await this.read(namespace, name, 'get', providerID, signal), this.view());
  }

  /**
   * The reconciler calls delete again at every poll until the Pod is gone; a Pod already
   * terminating is left alone, so the request (and its log line) happens once per deletion.
   */
  protected async doDelete(providerID: string, signal?: AbortSignal): Promise<void> {
    const { namespace, name } = this.ref(providerID, 'delete');
    let pod;
    try {
      pod = await this.read(namespace, name, 'delete', providerID, signal);
    } catch (err) {
      if (err instanceof NotFoundError) return;
      throw err;
    }
    if (pod.metadata?.deletionTimestamp) return;
    try {
      await this.core.deleteNamespacedPod({ name, namespace }, withRequestSignal(signal));
      this.logger.info(
        { providerID, graceSeconds: pod.spec?.terminationGracePeriodSeconds },
        'proxy pod deletion requested',
      );
    } catch (err) {
      const meaning = classifyKubeError(err, 'delete');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'delete', providerID);
    }
  }

  protected async doListByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    try {
      const list = await this.core.listNamespacedPod(
        { namespace: this.settings.namespace, labelSelector: ownedSelector(owner) },
        withRequestSignal(signal),
      );
      const view = this.view();
      return list.items.map((pod) => toInstance(pod, view));
    } catch (err) {
      throw this.mapped(classifyKubeError(err, 'list'), err, 'listByTag');
    }
  }

  /** How Pods are judged now: the start bound is measured from each Pod's creation. */
  private view(): PodViewOptions {
    return { now: new Date(), startTimeoutSeconds: this.settings.startTimeoutSeconds };
  }

  private async read(
    namespace: string,
    name: string,
    op: ProviderOperation,
    id: string,
    signal?: AbortSignal,
  ) {
    try {
      return await this.core.readNamespacedPod({ name, namespace }, withRequestSignal(signal));
    } catch (err) {
      throw this.mapped(classifyKubeError(err, 'get'), err, op, id);
    }
  }

  private ref(providerID: string, op: ProviderOperation): { namespace: string; name: string } {
    const [namespace, name, extra] = providerID.split('/');
    if (!namespace || !name || extra !== undefined) {
      throw new ProviderPermanentError(
        `malformed providerID "${providerID}", want <namespace>/<pod>`,
        this.ctx(op, providerID),
      );
    }
    return { namespace, name };
  }

  private mapped(meaning: KubeErrorMeaning, cause: unknown, op: ProviderOperation, id?: string) {
    const ctx = { ...this.ctx(op, id), cause };
    if (meaning === 'NotFound') return new NotFoundError('pod not found', ctx);
    return providerError(meaning === 'AlreadyExists' ? 'Transient' : meaning, messageOf(cause), ctx);
  }

  private ctx(operation: ProviderOperation, providerID?: string): ProviderErrorContext {
    return { provider: this.name, operation, providerID };
  }
}

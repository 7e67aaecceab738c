import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  LABEL_MANAGED,
  LABEL_OWNER,
  LABEL_UID,
  type CreateRequest,
  type Instance,
  type Provider,
} from '../contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  providerError,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../errors.js';
import type { KubernetesSettings } from './config.js';
import { classifyKubeError, messageOf, statusOf, type KubeErrorMeaning } from './error-mapping.js';
import { buildPod } from './pod-spec.js';
import { toInstance } from './pod-view.js';

export interface KubernetesProviderOptions {
  name: string;
  settings: KubernetesSettings;
  /** The only provider that talks to Kubernetes, through the core API. */
  core: CoreV1Api;
  logger: Logger;
}

/** The pod list selector matching every instance this operator labelled. */
/** The label selector for one owner's managed Pods. */
export function ownedSelector(owner: string): string {
  return `${LABEL_MANAGED}=true,${LABEL_OWNER}=${owner}`;
}

/**
 * Proxies as Squid Pods in one namespace (local development and CI: no cloud account).
 * providerID = "<namespace>/<pod name>". Calls check the AbortSignal before they start;
 * the generated client offers no per-call signal.
 */
export class KubernetesProvider implements Provider {
  constructor(private readonly opts: KubernetesProviderOptions) {}

  async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535) {
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    }
    const pod = buildPod(req, this.opts.settings);
    const namespace = this.opts.settings.namespace;
    const name = pod.metadata!.name!;
    const id = `${namespace}/${name}`;
    try {
      await this.opts.core.createNamespacedPod({ namespace, body: pod });
      this.opts.logger.info({ providerID: id, proxy: req.proxy }, 'proxy pod created');
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
    const existing = await this.read(namespace, name, 'create', id);
    const owner = existing.metadata?.labels?.[LABEL_UID];
    if (owner !== req.uid) {
      throw new ProviderPermanentError(
        `pod ${id} already exists for another Proxy (uid ${owner ?? 'none'})`,
        this.ctx('create', id),
      );
    }
    return id;
  }

  async get(providerID: string, signal?: AbortSignal): Promise<Instance> {
    signal?.throwIfAborted();
    const { namespace, name } = this.ref(providerID, 'get');
    return toInstance(await this.read(namespace, name, 'get', providerID));
  }

  async delete(providerID: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const { namespace, name } = this.ref(providerID, 'delete');
    try {
      await this.opts.core.deleteNamespacedPod({ name, namespace });
      this.opts.logger.info({ providerID }, 'proxy pod deleted');
    } catch (err) {
      const meaning = classifyKubeError(err, 'delete');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'delete', providerID);
    }
  }

  async listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    signal?.throwIfAborted();
    try {
      const list = await this.opts.core.listNamespacedPod({
        namespace: this.opts.settings.namespace,
        labelSelector: ownedSelector(owner),
      });
      return list.items.map(toInstance);
    } catch (err) {
      throw this.mapped(classifyKubeError(err, 'list'), err, 'listByTag');
    }
  }

  private async read(namespace: string, name: string, op: ProviderOperation, id: string) {
    try {
      return await this.opts.core.readNamespacedPod({ name, namespace });
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
    return { provider: this.opts.name, operation, providerID };
  }
}

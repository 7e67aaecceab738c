import type { Logger } from 'pino';
import {
  AbortableProvider,
  gcLabels,
  inject,
  instanceName,
  LABEL_OWNER,
  NotFoundError,
  ownershipFromLabels,
  PROVIDER_LOGGER,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
  ProviderPermanentError,
  type CreateRequest,
  type Instance,
  type ProviderErrorContext,
  type ProviderOperation,
} from 'proxy-operator/plugin';
import { parseMemoryConfig, type MemorySettings } from './config.js';

interface Stored {
  labels: Record<string, string>;
  createdAt: Date;
}

/**
 * The smallest complete provider: instances live in a Map. Replace the Map with your cloud's
 * API; keep the rest (an idempotent create named by instanceName, the GC labels, listByTag by
 * owner, the error taxonomy). AbortableProvider makes every call end when its signal aborts.
 */
@provider({ type: 'memory', config: parseMemoryConfig })
export class MemoryProvider extends AbortableProvider {
  private readonly instances = new Map<string, Stored>();

  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: MemorySettings,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
  ) {
    super();
  }

  protected async doCreate(req: CreateRequest): Promise<string> {
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535)
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    // Named from the Proxy UID and revision: a retried create finds what the first one made.
    const id = instanceName(req.uid, req.revision);
    if (!this.instances.has(id)) {
      this.instances.set(id, { labels: gcLabels(req), createdAt: new Date() });
      this.logger.info({ providerID: id, proxy: req.proxy }, 'instance created');
    }
    return id;
  }

  protected async doGet(providerID: string): Promise<Instance> {
    const stored = this.instances.get(providerID);
    if (!stored) throw new NotFoundError('no such instance', this.ctx('get', providerID));
    return this.view(providerID, stored);
  }

  protected async doDelete(providerID: string): Promise<void> {
    this.instances.delete(providerID); // deleting what is gone succeeds
  }

  protected async doListByTag(owner: string): Promise<Instance[]> {
    return [...this.instances]
      .filter(([, s]) => s.labels[LABEL_OWNER] === owner)
      .map(([id, s]) => this.view(id, s));
  }

  private view(id: string, stored: Stored): Instance {
    const running = Date.now() >= stored.createdAt.getTime() + this.settings.provisioningSeconds * 1000;
    return {
      id,
      ip: running ? this.settings.address : '',
      state: running ? 'Running' : 'Provisioning',
      ...ownershipFromLabels(stored.labels),
      createdAt: stored.createdAt,
    };
  }

  private ctx(operation: ProviderOperation, providerID?: string): ProviderErrorContext {
    return { provider: this.name, operation, providerID };
  }
}

import { link, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import {
  AbortableProvider,
  gcLabels,
  inject,
  instanceName,
  LABEL_MANAGED,
  LABEL_OWNER,
  LABEL_UID,
  ownershipFromLabels,
  PROVIDER_LOGGER,
  PROVIDER_METRICS,
  PROVIDER_NAME,
  PROVIDER_SETTINGS,
  provider,
  providerError,
  ProviderPermanentError,
  type CreateRequest,
  type Instance,
  type ProviderOperation,
} from 'proxy-operator/plugin';
import { parseDirectoryConfig, type DirectorySettings } from './config.js';
import { classifyFsError } from './error-mapping.js';

/** What the "cloud" stores per instance. */
interface InstanceRecord {
  id: string;
  labels: Record<string, string>;
  proxy: string;
  port: number;
  createdAt: string;
}

const ID_PATTERN = /^proxy-[0-9a-f]{12}(-[0-9a-z]{1,8})?$/;

/**
 * A complete minimal provider plugin: each instance is a JSON file in a folder. It shows
 * everything a real one does — the decorator, a config reader, injected settings, logger and
 * metrics registry, an idempotent create, the GC labels with the owner scope, the error
 * taxonomy and AbortSignal handling (AbortableProvider makes every call give up when its signal
 * aborts; the `do*` calls hand the signal on to what can cancel) — with a folder standing in for a cloud API.
 */
@provider({ type: 'directory', config: parseDirectoryConfig })
export class DirectoryProvider extends AbortableProvider {
  private readonly created: Counter<'provider'>;

  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: DirectorySettings,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
    @inject(PROVIDER_METRICS) metrics: Registry,
  ) {
    super();
    // One counter per registry, shared by every provider of this type.
    this.created =
      (metrics.getSingleMetric('proxy_operator_directory_instances_created_total') as Counter<'provider'>) ??
      new Counter({
        name: 'proxy_operator_directory_instances_created_total',
        help: 'Instances the directory provider created.',
        labelNames: ['provider'],
        registers: [metrics],
      });
  }

  protected async doCreate(req: CreateRequest, sig?: AbortSignal): Promise<string> {
    await this.apiLatency(sig);
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535) {
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    }
    // Named from the Proxy UID and revision: a repeated create finds what the first made.
    const id = instanceName(req.uid, req.revision);
    const record: InstanceRecord = {
      id,
      labels: gcLabels(req),
      proxy: req.proxy,
      port: req.port,
      createdAt: new Date().toISOString(),
    };
    const draft = join(this.settings.path, `.${id}.${process.pid}.${Math.random().toString(36).slice(2)}`);
    try {
      await mkdir(this.settings.path, { recursive: true });
      await writeFile(draft, JSON.stringify(record), { signal: sig });
      // link() never replaces: exactly one of several racing creates makes the instance.
      await link(draft, this.file(id));
      this.created.inc({ provider: this.name });
      this.logger.info({ providerID: id, proxy: req.proxy }, 'instance created');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw this.mapped(err, 'create', id);
      const existing = await this.read(id, 'create', sig);
      if (existing.labels[LABEL_UID] !== req.uid) {
        throw new ProviderPermanentError(`${id} already belongs to another Proxy`, this.ctx('create', id));
      }
    } finally {
      await rm(draft, { force: true }).catch(() => undefined);
    }
    return id;
  }

  protected async doGet(providerID: string, sig?: AbortSignal): Promise<Instance> {
    await this.apiLatency(sig);
    return this.view(await this.read(this.checked(providerID, 'get'), 'get', sig));
  }

  protected async doDelete(providerID: string, sig?: AbortSignal): Promise<void> {
    await this.apiLatency(sig);
    const id = this.checked(providerID, 'delete');
    try {
      await rm(this.file(id), { force: true }); // force: deleting what is gone succeeds
    } catch (err) {
      throw this.mapped(err, 'delete', id);
    }
  }

  protected async doListByTag(owner: string, sig?: AbortSignal): Promise<Instance[]> {
    await this.apiLatency(sig);
    let names: string[];
    try {
      names = (await readdir(this.settings.path)).filter((n) => n.endsWith('.json'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw this.mapped(err, 'listByTag');
    }
    const records = await Promise.all(
      names.map((n) =>
        readFile(join(this.settings.path, n), { encoding: 'utf8', signal: sig }).then(
          (text) => parseRecord(text),
          () => undefined, // deleted meanwhile
        ),
      ),
    );
    // Only this owner's managed instances: never anyone else's, never unowned ones.
    return records
      .filter(
        (r): r is InstanceRecord => r?.labels?.[LABEL_MANAGED] === 'true' && r.labels[LABEL_OWNER] === owner,
      )
      .map((r) => this.view(r));
  }

  private view(record: InstanceRecord): Instance {
    const createdAt = new Date(record.createdAt);
    const running = Date.now() >= createdAt.getTime() + this.settings.provisioningSeconds * 1000;
    return {
      id: record.id,
      ip: running ? this.settings.address : '',
      state: running ? 'Running' : 'Provisioning',
      ...ownershipFromLabels(record.labels),
      createdAt,
    };
  }

  private async read(id: string, op: ProviderOperation, signal?: AbortSignal): Promise<InstanceRecord> {
    let text: string;
    try {
      text = await readFile(this.file(id), { encoding: 'utf8', signal });
    } catch (err) {
      throw this.mapped(err, op, id);
    }
    const record = parseRecord(text);
    if (!record) throw new ProviderPermanentError(`${id}: unreadable instance record`, this.ctx(op, id));
    return record;
  }

  /** A providerID this provider could have made; anything else is Permanent, never a path. */
  private checked(providerID: string, op: ProviderOperation): string {
    if (!ID_PATTERN.test(providerID)) {
      throw new ProviderPermanentError(`malformed providerID "${providerID}"`, this.ctx(op, providerID));
    }
    return providerID;
  }

  private apiLatency(signal?: AbortSignal): Promise<void> {
    return this.settings.latencyMillis > 0
      ? sleep(this.settings.latencyMillis, undefined, { signal })
      : Promise.resolve();
  }

  private file(id: string): string {
    return join(this.settings.path, `${id}.json`);
  }

  private mapped(err: unknown, op: ProviderOperation, providerID?: string) {
    const message = err instanceof Error ? err.message : String(err);
    return providerError(classifyFsError(err), message, { ...this.ctx(op, providerID), cause: err });
  }

  private ctx(operation: ProviderOperation, providerID?: string) {
    return { provider: this.name, operation, providerID };
  }
}

function parseRecord(text: string): InstanceRecord | undefined {
  try {
    const value = JSON.parse(text) as InstanceRecord;
    return typeof value?.id === 'string' && typeof value.createdAt === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

import type { Logger } from 'pino';
import {
  gcLabels,
  ownershipFromLabels,
  type CreateRequest,
  type Instance,
  type Provider,
} from '../contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  QuotaExceededError,
  providerError,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../errors.js';
import type { ComputeApi } from './compute-api.js';
import type { GcpSettings } from './config.js';
import { classifyGcpError, operationFailure, type GcpErrorMeaning } from './error-mapping.js';
import { toInstance } from './instance-view.js';
import { ownedFilter, buildInsert, formatProviderID, missingPlacement, parseProviderID } from './requests.js';

export interface GcpProviderOptions {
  name: string;
  settings: GcpSettings;
  api: ComputeApi;
  logger: Logger;
  /** Milliseconds since the epoch; injectable for the create-timeout tests. */
  now?: () => number;
}

/** An insert this process submitted whose instance has not been seen yet. */
interface PendingInsert {
  ownership: Pick<Instance, 'uid' | 'owner' | 'namespace' | 'revision'>;
  zone: string;
  operation: string;
  submittedAt: number;
}

/**
 * Compute Engine VMs with ephemeral external IPs. Every call submits and returns; readiness
 * is found by later get() calls. A failed insert (stockout, quota) is visible only on its
 * zone operation, so accepted inserts are remembered until their instance shows up: while
 * it is missing, get() reports Provisioning, or the operation's failure once it has one.
 */
export class GcpProvider implements Provider {
  private readonly pending = new Map<string, PendingInsert>();
  private readonly now: () => number;

  constructor(private readonly opts: GcpProviderOptions) {
    this.now = opts.now ?? Date.now;
  }

  async create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted();
    const missing = missingPlacement(req);
    if (missing) throw new ProviderPermanentError(`${missing} is required for GCP`, this.ctx('create'));
    const plan = buildInsert(req, this.opts.settings);
    const id = formatProviderID(plan.ref);
    try {
      const { operation } = await this.opts.api.insert({
        project: plan.ref.project,
        zone: plan.ref.zone,
        instanceResource: plan.instanceResource,
      });
      this.pending.set(id, {
        ownership: ownershipFromLabels(gcLabels(req)),
        zone: plan.ref.zone,
        operation,
        submittedAt: this.now(),
      });
      this.opts.logger.info({ providerID: id, operation, proxy: req.proxy }, 'GCP insert submitted');
    } catch (err) {
      const meaning = classifyGcpError(err, 'insert');
      // The name derives from the UID, so an existing VM of that name is this Proxy's.
      if (meaning !== 'AlreadyExists') throw this.mapped(meaning, err, 'create', id);
    }
    return id;
  }

  async get(providerID: string, signal?: AbortSignal): Promise<Instance> {
    signal?.throwIfAborted();
    const ref = this.ref(providerID, 'get');
    try {
      const vm = await this.opts.api.get(ref);
      this.pending.delete(providerID);
      return toInstance(vm, ref.project);
    } catch (err) {
      const meaning = classifyGcpError(err, 'get');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'get', providerID);
      const pending = this.pending.get(providerID);
      if (!pending) throw this.mapped('NotFound', err, 'get', providerID);
      return this.pendingInsertState(providerID, pending, signal);
    }
  }

  async delete(providerID: string, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const ref = this.ref(providerID, 'delete');
    this.pending.delete(providerID);
    try {
      const { operation } = await this.opts.api.delete(ref);
      this.opts.logger.info({ providerID, operation }, 'GCP delete submitted');
    } catch (err) {
      const meaning = classifyGcpError(err, 'delete');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'delete', providerID);
    }
  }

  async listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    signal?.throwIfAborted();
    const { project } = this.opts.settings;
    try {
      const vms = await this.opts.api.aggregatedList({ project, filter: ownedFilter(owner) });
      return vms.map((vm) => toInstance(vm, project));
    } catch (err) {
      throw this.mapped(classifyGcpError(err, 'list'), err, 'listByTag');
    }
  }

  /** The instance is not visible yet: still coming, failed on its operation, or timed out. */
  private async pendingInsertState(
    id: string,
    pending: PendingInsert,
    signal?: AbortSignal,
  ): Promise<Instance> {
    signal?.throwIfAborted();
    let failure: ReturnType<typeof operationFailure>;
    try {
      const op = await this.opts.api.getZoneOperation({
        project: this.opts.settings.project,
        zone: pending.zone,
        operation: pending.operation,
      });
      failure = operationFailure(op);
    } catch (err) {
      // Cannot see the operation: fall through to the timeout rule rather than fail get().
      this.opts.logger.warn(
        { providerID: id, operation: pending.operation, err },
        'cannot read GCP insert operation',
      );
    }
    if (failure) {
      // Forget it: after the caller's retry delay, a NotFound makes it submit a fresh insert.
      this.pending.delete(id);
      throw providerError(
        failure.kind,
        `insert operation ${pending.operation} failed: ${failure.message}`,
        this.ctx('get', id),
      );
    }
    const timeoutMs = this.opts.settings.createTimeoutMinutes * 60_000;
    if (this.now() - pending.submittedAt > timeoutMs) {
      this.pending.delete(id);
      // Most often a stockout the operation did not explain: retry slowly, not never.
      throw new QuotaExceededError(
        `instance did not appear within ${this.opts.settings.createTimeoutMinutes} minutes of insert operation ${pending.operation}`,
        this.ctx('get', id),
      );
    }
    return {
      id,
      ip: '',
      state: 'Provisioning',
      ...pending.ownership,
      createdAt: new Date(pending.submittedAt),
    };
  }

  private ref(providerID: string, op: ProviderOperation) {
    const ref = parseProviderID(providerID);
    if (!ref) {
      throw new ProviderPermanentError(
        `malformed providerID "${providerID}", want <project>/<zone>/<instance>`,
        this.ctx(op, providerID),
      );
    }
    return ref;
  }

  private mapped(meaning: GcpErrorMeaning, cause: unknown, op: ProviderOperation, id?: string) {
    const message = cause instanceof Error ? cause.message : String(cause);
    if (meaning === 'NotFound')
      return new NotFoundError('instance not found', { ...this.ctx(op, id), cause });
    // classifyGcpError says AlreadyExists only for inserts, which create() handles itself.
    return providerError(meaning === 'AlreadyExists' ? 'Transient' : meaning, message, {
      ...this.ctx(op, id),
      cause,
    });
  }

  private ctx(operation: ProviderOperation, providerID?: string): ProviderErrorContext {
    return { provider: this.opts.name, operation, providerID };
  }
}

import 'reflect-metadata';
import type { Logger } from 'pino';
import { inject } from 'tsyringe';
import { AbortableProvider } from '../abortable-provider.js';
import { gcLabels, ownershipFromLabels, type CreateRequest, type Instance } from '../contract.js';
import {
  NotFoundError,
  ProviderPermanentError,
  QuotaExceededError,
  providerError,
  type ProviderErrorContext,
  type ProviderOperation,
} from '../errors.js';
import { PROVIDER_LOGGER, PROVIDER_NAME, PROVIDER_SETTINGS, provider } from '../provider-class.js';
import type { ComputeApi, InstanceRef } from './compute-api.js';
import { parseGcpConfig, type GcpSettings } from './config.js';
import { classifyGcpError, operationFailure, type GcpErrorMeaning } from './error-mapping.js';
import { toInstance } from './instance-view.js';
import { ownedFilter, buildInsert, formatProviderID, missingPlacement, parseProviderID } from './requests.js';

/** DI token for a Compute API stand-in (tests); the real client is built on first use otherwise. */
export const COMPUTE_API = Symbol.for('proxy-operator.gcp.compute-api');
/** DI token for a test clock (milliseconds since the epoch). */
export const GCP_CLOCK = Symbol.for('proxy-operator.gcp.clock');

/** An insert this process submitted whose instance has not been seen yet. */
interface PendingInsert {
  ownership: Pick<Instance, 'uid' | 'owner' | 'namespace' | 'revision'>;
  zone: string;
  operation: string;
  submittedAt: number;
}

/** A delete this process submitted: while its operation runs, the delete is never re-issued. */
interface PendingDelete {
  zone: string;
  operation: string;
}

/** Instance statuses in which a delete is already under way (or cannot be accepted yet). */
const DELETE_UNDER_WAY = new Set(['STOPPING']);

/**
 * Compute Engine VMs with ephemeral external IPs. Every call submits and returns; readiness
 * is found by later get() calls. A failed insert (stockout, quota) is visible only on its
 * zone operation, so accepted inserts are remembered until their instance shows up: while
 * it is missing, get() reports Provisioning, or the operation's failure once it has one.
 */
@provider({ type: 'gcp', config: parseGcpConfig })
export class GcpProvider extends AbortableProvider {
  private readonly pending = new Map<string, PendingInsert>();
  private readonly deleting = new Map<string, PendingDelete>();
  private readonly now: () => number;
  private apiPromise?: Promise<ComputeApi>;

  constructor(
    @inject(PROVIDER_NAME) private readonly name: string,
    @inject(PROVIDER_SETTINGS) private readonly settings: GcpSettings,
    @inject(PROVIDER_LOGGER) private readonly logger: Logger,
    @inject(COMPUTE_API, { isOptional: true }) api?: ComputeApi,
    @inject(GCP_CLOCK, { isOptional: true }) now?: () => number,
  ) {
    super();
    this.now = now ?? Date.now;
    if (api) this.apiPromise = Promise.resolve(api);
  }

  async close(): Promise<void> {
    const api = await this.apiPromise?.catch(() => undefined);
    await api?.close?.();
  }

  protected async doCreate(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    const missing = missingPlacement(req);
    if (missing) throw new ProviderPermanentError(`${missing} is required for GCP`, this.ctx('create'));
    if (!Number.isInteger(req.port) || req.port < 1 || req.port > 65535) {
      throw new ProviderPermanentError(`port must be 1-65535, got ${req.port}`, this.ctx('create'));
    }
    const plan = buildInsert(req, this.settings);
    const id = formatProviderID(plan.ref);
    const api = await this.api();
    try {
      const { operation } = await api.insert(
        { project: plan.ref.project, zone: plan.ref.zone, instanceResource: plan.instanceResource },
        signal,
      );
      this.pending.set(id, {
        ownership: ownershipFromLabels(gcLabels(req)),
        zone: plan.ref.zone,
        operation,
        submittedAt: this.now(),
      });
      this.logger.info({ providerID: id, operation, proxy: req.proxy }, 'GCP insert submitted');
    } catch (err) {
      const meaning = classifyGcpError(err, 'insert');
      // The name derives from the UID, so an existing VM of that name is this Proxy's.
      if (meaning !== 'AlreadyExists') throw this.mapped(meaning, err, 'create', id);
    }
    return id;
  }

  protected async doGet(providerID: string, signal?: AbortSignal): Promise<Instance> {
    const ref = this.ref(providerID, 'get');
    const api = await this.api();
    try {
      const vm = await api.get(ref, signal);
      this.pending.delete(providerID);
      return toInstance(vm, ref.project);
    } catch (err) {
      signal?.throwIfAborted();
      const meaning = classifyGcpError(err, 'get');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'get', providerID);
      this.deleting.delete(providerID);
      const pending = this.pending.get(providerID);
      if (!pending) throw this.mapped('NotFound', err, 'get', providerID);
      return this.pendingInsertState(providerID, pending, signal);
    }
  }

  /**
   * Submits a delete unless one is under way: GCP answers 400 resourceNotReady to a delete of
   * a VM that is STOPPING or has an operation in flight, so while this process's own delete
   * operation runs, or the VM is STOPPING, nothing is re-issued (the caller polls get()).
   */
  protected async doDelete(providerID: string, signal?: AbortSignal): Promise<void> {
    const ref = this.ref(providerID, 'delete');
    this.pending.delete(providerID);
    const api = await this.api();
    const underWay = await this.deletionUnderWay(api, providerID, ref, signal);
    if (underWay) {
      this.logger.debug({ providerID, reason: underWay }, 'GCP delete under way: not re-issued');
      return;
    }
    try {
      const { operation } = await api.delete(ref, signal);
      this.deleting.set(providerID, { zone: ref.zone, operation });
      this.logger.info({ providerID, operation }, 'GCP delete submitted');
    } catch (err) {
      signal?.throwIfAborted();
      const meaning = classifyGcpError(err, 'delete');
      if (meaning !== 'NotFound') throw this.mapped(meaning, err, 'delete', providerID);
      this.deleting.delete(providerID);
    }
  }

  /** Why no delete should be submitted now ('gone' included), or undefined to submit one. */
  private async deletionUnderWay(
    api: ComputeApi,
    providerID: string,
    ref: InstanceRef,
    signal?: AbortSignal,
  ): Promise<'operation running' | 'stopping' | 'gone' | undefined> {
    const own = this.deleting.get(providerID);
    if (own) {
      try {
        const op = await api.getZoneOperation(
          { project: ref.project, zone: own.zone, operation: own.operation },
          signal,
        );
        if (op.status !== 'DONE') return 'operation running';
        this.deleting.delete(providerID);
      } catch {
        signal?.throwIfAborted();
        // Cannot read it: judge by the VM's own status below.
      }
    }
    try {
      const vm = await api.get(ref, signal);
      return DELETE_UNDER_WAY.has(vm.status ?? '') ? 'stopping' : undefined;
    } catch (err) {
      signal?.throwIfAborted();
      // Gone already: nothing to delete. Any other answer: let the delete itself decide.
      return classifyGcpError(err, 'get') === 'NotFound' ? 'gone' : undefined;
    }
  }

  protected async doListByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    const { project } = this.settings;
    const api = await this.api();
    try {
      const vms = await api.aggregatedList({ project, filter: ownedFilter(owner) }, signal);
      return vms.map((vm) => toInstance(vm, project));
    } catch (err) {
      signal?.throwIfAborted();
      throw this.mapped(classifyGcpError(err, 'list'), err, 'listByTag');
    }
  }

  /** The instance is not visible yet: still coming, failed on its operation, or timed out. */
  private async pendingInsertState(
    id: string,
    pending: PendingInsert,
    signal?: AbortSignal,
  ): Promise<Instance> {
    let failure: ReturnType<typeof operationFailure>;
    try {
      const op = await (
        await this.api()
      ).getZoneOperation(
        { project: this.settings.project, zone: pending.zone, operation: pending.operation },
        signal,
      );
      failure = operationFailure(op);
    } catch (err) {
      signal?.throwIfAborted();
      // Cannot see the operation: fall through to the timeout rule rather than fail get().
      this.logger.warn(
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
    const timeoutMs = this.settings.createTimeoutMinutes * 60_000;
    if (this.now() - pending.submittedAt > timeoutMs) {
      this.pending.delete(id);
      // Most often a stockout the operation did not explain: retry slowly, not never.
      throw new QuotaExceededError(
        `instance did not appear within ${this.settings.createTimeoutMinutes} minutes of insert operation ${pending.operation}`,
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

  /** The Compute client, built on first use: google-gax is heavy and only GCP-configured operators need it. */
  private api(): Promise<ComputeApi> {
    this.apiPromise ??= import('./google-compute-api.js').then(
      ({ GoogleComputeApi }) => new GoogleComputeApi(this.settings.requestTimeoutSeconds * 1000),
    );
    return this.apiPromise;
  }

  private ref(providerID: string, op: ProviderOperation): InstanceRef {
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
    return { provider: this.name, operation, providerID };
  }
}

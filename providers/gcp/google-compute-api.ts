import { InstancesClient, ZoneOperationsClient } from '@google-cloud/compute';
import type { ComputeApi, GcpInstance, GcpOperation, InstanceRef } from './compute-api.js';

/**
 * ComputeApi on @google-cloud/compute v7. Credentials: Application Default Credentials only
 * (workload identity in-cluster, gcloud ADC locally). Every call carries a short timeout
 * (the library's default is 600 s, and insert/delete are never retried by it) and the
 * caller's AbortSignal, which google-gax turns into a cancelled request.
 */
export class GoogleComputeApi implements ComputeApi {
  /** The clients default to ADC-authenticated ones; tests pass stand-ins. */
  constructor(
    private readonly timeoutMs: number,
    private readonly instances: InstancesClient = new InstancesClient(),
    private readonly operations: ZoneOperationsClient = new ZoneOperationsClient(),
  ) {}

  async insert(
    req: { project: string; zone: string; instanceResource: GcpInstance },
    signal?: AbortSignal,
  ): Promise<{ operation: string }> {
    const [op, raw] = await this.instances.insert(req, this.options(signal));
    return { operation: raw?.name ?? op.name ?? '' };
  }

  async get(ref: InstanceRef, signal?: AbortSignal): Promise<GcpInstance> {
    const [vm] = await this.instances.get(ref, this.options(signal));
    return vm;
  }

  async delete(ref: InstanceRef, signal?: AbortSignal): Promise<{ operation: string }> {
    const [op, raw] = await this.instances.delete(ref, this.options(signal));
    return { operation: raw?.name ?? op.name ?? '' };
  }

  async aggregatedList(
    req: { project: string; filter: string },
    signal?: AbortSignal,
  ): Promise<GcpInstance[]> {
    const found: GcpInstance[] = [];
    // Empty zones come back with a NO_RESULTS_ON_PAGE warning and no instances: skipped.
    for await (const [, scoped] of this.instances.aggregatedListAsync(req, this.options(signal))) {
      signal?.throwIfAborted();
      found.push(...(scoped.instances ?? []));
    }
    return found;
  }

  async getZoneOperation(
    req: { project: string; zone: string; operation: string },
    signal?: AbortSignal,
  ): Promise<GcpOperation> {
    const [op] = await this.operations.get(req, this.options(signal));
    return op;
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.instances.close(), this.operations.close()]);
  }

  private options(signal: AbortSignal | undefined): { timeout: number; signal?: AbortSignal } {
    return signal ? { timeout: this.timeoutMs, signal } : { timeout: this.timeoutMs };
  }
}

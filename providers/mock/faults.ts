import type { ProviderOperation } from '../errors.js';

/** A failure of that kind, or `hang`: the call never answers (an unresponsive cloud) until aborted. */
export type FaultKind = 'quota' | 'transient' | 'permanent' | 'hang';
export const FAULT_KINDS: readonly FaultKind[] = ['quota', 'transient', 'permanent', 'hang'];
export const FAULT_OPERATIONS: readonly ProviderOperation[] = ['create', 'get', 'delete', 'listByTag'];

export interface Fault {
  kind: FaultKind;
  count: number;
}

/** Queued failures per operation; each call consumes one. Queued in order of injection. */
export class FaultPlan {
  private readonly queues = new Map<ProviderOperation, FaultKind[]>();

  inject(operation: ProviderOperation, kind: FaultKind, count = 1): void {
    if (!Number.isInteger(count) || count < 1)
      throw new Error(`fault count must be an integer >= 1, got ${count}`);
    const queue = this.queues.get(operation) ?? [];
    for (let i = 0; i < count; i++) queue.push(kind);
    this.queues.set(operation, queue);
  }

  /** The fault for this call, if one is queued. */
  take(operation: ProviderOperation): FaultKind | undefined {
    return this.queues.get(operation)?.shift();
  }

  pending(operation: ProviderOperation): number {
    return this.queues.get(operation)?.length ?? 0;
  }

  clear(): void {
    this.queues.clear();
  }
}

import type { protos } from '@google-cloud/compute';

export type GcpInstance = protos.google.cloud.compute.v1.IInstance;
export type GcpOperation = protos.google.cloud.compute.v1.IOperation;

export interface InstanceRef {
  project: string;
  zone: string;
  instance: string;
}

/**
 * The five Compute Engine calls the GCP provider makes, owned here so tests inject a fake
 * and the real client stays a thin adapter (google-compute-api.ts).
 * Errors are the library's own; the provider maps them (error-mapping.ts). Every call takes
 * the caller's AbortSignal and cancels its request when it aborts.
 */
export interface ComputeApi {
  /** Submits an insert; resolves with its zone operation's name without waiting for it. */
  insert(
    req: { project: string; zone: string; instanceResource: GcpInstance },
    signal?: AbortSignal,
  ): Promise<{ operation: string }>;
  get(ref: InstanceRef, signal?: AbortSignal): Promise<GcpInstance>;
  /** Submits a delete without waiting for it. */
  delete(ref: InstanceRef, signal?: AbortSignal): Promise<{ operation: string }>;
  /** Every instance in every zone matching an AIP-160 filter. */
  aggregatedList(req: { project: string; filter: string }, signal?: AbortSignal): Promise<GcpInstance[]>;
  /** A zone operation: where a stockout or quota failure of an accepted insert shows up. */
  getZoneOperation(
    req: { project: string; zone: string; operation: string },
    signal?: AbortSignal,
  ): Promise<GcpOperation>;
  /** Releases the client's connections. */
  close?(): Promise<void>;
}

import type {
  ComputeApi,
  GcpInstance,
  GcpOperation,
  InstanceRef,
} from '../../../providers/gcp/compute-api.js';

export type Method = Exclude<keyof ComputeApi, 'close'>;

/** The error shapes google-gax v7 throws for Compute's REST answers. */
export const gcpErrors = {
  notFound: () => Object.assign(new Error('not found'), { code: 5, httpStatusCode: 404 }),
  alreadyExists: () => Object.assign(new Error('already exists'), { code: 10, httpStatusCode: 409 }),
  /** 400 resourceNotReady: a call on an instance with an operation in flight. */
  notReady: (ref: InstanceRef) =>
    Object.assign(
      new Error(
        `The resource 'projects/${ref.project}/zones/${ref.zone}/instances/${ref.instance}' is not ready`,
      ),
      { code: 3, httpStatusCode: 400 },
    ),
};

/**
 * An in-memory Compute Engine behind the provider's thin ComputeApi (GCP has no emulator).
 * It keeps to the real API's observable rules the provider depends on: inserts are accepted
 * (and the VM appears when the test says so), list filters by labels, a delete takes
 * `deleteMillis` during which the VM is STOPPING and a second delete answers 400
 * resourceNotReady, and every call honours its AbortSignal (or hangs, until aborted, when
 * its method is in `hanging`).
 */
export class FakeCompute implements ComputeApi {
  readonly vms = new Map<string, GcpInstance>();
  readonly operations = new Map<string, GcpOperation>();
  readonly calls: { method: Method; req: unknown }[] = [];
  readonly failures = new Map<Method, unknown>();
  /** Methods that never answer until their signal aborts: an unresponsive API. */
  readonly hanging = new Set<Method>();
  /** Calls whose signal aborted while they were in flight: the signal reached the API. */
  readonly aborted: Method[] = [];
  /** When true, an accepted insert makes the VM visible at once (the common case). */
  visibleOnInsert = true;
  /** How long a delete keeps the VM STOPPING before it is gone (0: gone at once). */
  deleteMillis = 0;
  now: () => number = () => Date.now();
  private readonly deletions = new Map<string, { at: number; operation: string }>();
  private seq = 0;

  private async enter(method: Method, req: unknown, signal?: AbortSignal): Promise<void> {
    this.calls.push({ method, req });
    signal?.throwIfAborted();
    this.settleDeletions();
    if (this.hanging.has(method)) {
      await new Promise<never>((_, reject) => {
        signal?.addEventListener('abort', () => {
          this.aborted.push(method);
          reject(
            Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' }),
          );
        });
      });
    }
    const failure = this.failures.get(method);
    if (failure) {
      this.failures.delete(method);
      throw failure;
    }
  }

  async insert(req: { project: string; zone: string; instanceResource: GcpInstance }, signal?: AbortSignal) {
    await this.enter('insert', req, signal);
    const name = req.instanceResource.name!;
    if (this.vms.has(name)) throw gcpErrors.alreadyExists();
    const operation = `operation-${++this.seq}`;
    this.operations.set(operation, { name: operation, status: 'RUNNING' });
    if (this.visibleOnInsert) {
      this.vms.set(name, {
        ...req.instanceResource,
        zone: `projects/${req.project}/zones/${req.zone}`,
        status: 'PROVISIONING',
        creationTimestamp: new Date(this.now()).toISOString(),
      });
    }
    return { operation };
  }

  async get(ref: InstanceRef, signal?: AbortSignal) {
    await this.enter('get', ref, signal);
    const vm = this.vms.get(ref.instance);
    if (!vm) throw gcpErrors.notFound();
    return structuredClone(vm);
  }

  async delete(ref: InstanceRef, signal?: AbortSignal) {
    await this.enter('delete', ref, signal);
    const vm = this.vms.get(ref.instance);
    if (!vm) throw gcpErrors.notFound();
    if (vm.status === 'STOPPING') throw gcpErrors.notReady(ref);
    const operation = `delete-${++this.seq}`;
    if (this.deleteMillis <= 0) {
      this.vms.delete(ref.instance);
      this.operations.set(operation, { name: operation, status: 'DONE' });
    } else {
      vm.status = 'STOPPING';
      this.operations.set(operation, { name: operation, status: 'RUNNING' });
      this.deletions.set(ref.instance, { at: this.now() + this.deleteMillis, operation });
    }
    return { operation };
  }

  async aggregatedList(req: { project: string; filter: string }, signal?: AbortSignal) {
    await this.enter('aggregatedList', req, signal);
    const wanted = parseLabelFilter(req.filter);
    return [...this.vms.values()]
      .filter((vm) => Object.entries(wanted).every(([k, v]) => vm.labels?.[k] === v))
      .map((vm) => structuredClone(vm));
  }

  async getZoneOperation(req: { project: string; zone: string; operation: string }, signal?: AbortSignal) {
    await this.enter('getZoneOperation', req, signal);
    const op = this.operations.get(req.operation);
    if (!op) throw gcpErrors.notFound();
    return structuredClone(op);
  }

  /** Finishes the deletes whose time has come. */
  private settleDeletions(): void {
    for (const [name, { at, operation }] of this.deletions) {
      if (this.now() < at) continue;
      this.deletions.delete(name);
      this.vms.delete(name);
      this.operations.set(operation, { name: operation, status: 'DONE' });
    }
  }
}

/**
 * The AIP-160 label filter the provider sends (`labels.k = "v" AND …`) as a map; any other
 * syntax throws, so a change in what the provider sends cannot pass unnoticed.
 */
export function parseLabelFilter(filter: string): Record<string, string> {
  const wanted: Record<string, string> = {};
  for (const part of filter.split(' AND ')) {
    const m = /^labels\.([a-z][-_a-z0-9]*) = "([^"]*)"$/.exec(part.trim());
    if (!m) throw new Error(`fake Compute: unsupported filter term ${JSON.stringify(part)}`);
    wanted[m[1]] = m[2];
  }
  return wanted;
}

import type { CreateRequest, Instance, Provider } from '../../providers/contract.js';
import { providerError } from '../../providers/errors.js';

/** Passes every call on to `inner`: a test overrides only the call it bends. */
export class DelegatingProvider implements Provider {
  constructor(protected readonly inner: Provider) {}

  create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    return this.inner.create(req, signal);
  }

  get(id: string, signal?: AbortSignal): Promise<Instance> {
    return this.inner.get(id, signal);
  }

  delete(id: string, signal?: AbortSignal): Promise<void> {
    return this.inner.delete(id, signal);
  }

  listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    return this.inner.listByTag(owner, signal);
  }
}

/** Records the id of every instance deleted, in `deletes`: what the autopilot took out. */
export class DeleteRecordingProvider extends DelegatingProvider {
  constructor(
    inner: Provider,
    private readonly deletes: string[],
  ) {
    super(inner);
  }

  override delete(id: string, signal?: AbortSignal): Promise<void> {
    this.deletes.push(id);
    return super.delete(id, signal);
  }
}

/**
 * Records deletes as DeleteRecordingProvider does and, while `refusingCreates` is set, refuses
 * every create as a provider API in an outage does (its running instances serve on): a
 * Transient 503, counted in `refused`.
 */
export class CreateOutageProvider extends DeleteRecordingProvider {
  refusingCreates = false;
  refused = 0;

  override create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    if (this.refusingCreates) {
      this.refused++;
      return Promise.reject(
        providerError('Transient', '503 the provider API is unavailable', {
          provider: 'mock',
          operation: 'create',
        }),
      );
    }
    return super.create(req, signal);
  }
}

/** An instance as StoppedReportingProvider names it: a replacement has its old one's ID, not its birth. */
export const instanceKey = (i: Instance): string => `${i.id}@${i.createdAt.getTime()}`;

/**
 * Reports the instances in `stopped` (by instanceKey) Stopped, as a maintenance event, an
 * account suspension or a plugin misreading state does: they serve on, the report is the fault.
 * Records deletes and refuses creates during an outage as CreateOutageProvider does.
 */
export class StoppedReportingProvider extends CreateOutageProvider {
  stopped = new Set<string>();

  private view(i: Instance): Instance {
    return this.stopped.has(instanceKey(i))
      ? { ...i, state: 'Stopped', detail: 'stopped by a maintenance event' }
      : i;
  }

  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    return this.view(await super.get(id, signal));
  }

  override async listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    return (await super.listByTag(owner, signal)).map((i) => this.view(i));
  }
}

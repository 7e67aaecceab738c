import type { CreateRequest, Instance, Provider } from '../../providers/contract.js';

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

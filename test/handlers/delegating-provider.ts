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

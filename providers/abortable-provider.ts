import { withSignal } from './abort.js';
import type { CreateRequest, Instance, Provider } from './contract.js';

/**
 * A Provider whose four calls honour their AbortSignal by construction: a subclass writes
 * the `do*` calls (handing the signal on to its SDK, which may cancel the request itself),
 * and every public call rejects with the caller's reason the moment the signal aborts.
 */
export abstract class AbortableProvider implements Provider {
  create(req: CreateRequest, signal?: AbortSignal): Promise<string> {
    return withSignal(signal, (sig) => this.doCreate(req, sig));
  }

  get(providerID: string, signal?: AbortSignal): Promise<Instance> {
    return withSignal(signal, (sig) => this.doGet(providerID, sig));
  }

  delete(providerID: string, signal?: AbortSignal): Promise<void> {
    return withSignal(signal, (sig) => this.doDelete(providerID, sig));
  }

  listByTag(owner: string, signal?: AbortSignal): Promise<Instance[]> {
    return withSignal(signal, (sig) => this.doListByTag(owner, sig));
  }

  protected abstract doCreate(req: CreateRequest, signal?: AbortSignal): Promise<string>;
  protected abstract doGet(providerID: string, signal?: AbortSignal): Promise<Instance>;
  protected abstract doDelete(providerID: string, signal?: AbortSignal): Promise<void>;
  protected abstract doListByTag(owner: string, signal?: AbortSignal): Promise<Instance[]>;
}

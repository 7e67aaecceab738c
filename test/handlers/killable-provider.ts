import type { Instance, Provider } from '../../providers/contract.js';
import { DelegatingProvider } from './delegating-provider.js';

/** Where a killed instance answers from: nothing listens there. */
export const DEAD_IP = '127.0.0.254';

/** The mock, recording deletes into `deletes`; a killed instance answers from a dead address, as a crashed Squid. */
export class Killable extends DelegatingProvider {
  private readonly dead = new Set<string>();

  constructor(
    inner: Provider,
    private readonly deletes: string[],
  ) {
    super(inner);
  }

  async kill(id: string): Promise<void> {
    const i = await this.inner.get(id);
    this.dead.add(`${id}@${i.createdAt.getTime()}`);
  }

  override async get(id: string, signal?: AbortSignal): Promise<Instance> {
    const i = await this.inner.get(id, signal);
    return this.dead.has(`${id}@${i.createdAt.getTime()}`) && i.ip ? { ...i, ip: DEAD_IP } : i;
  }

  override delete(id: string, signal?: AbortSignal): Promise<void> {
    this.deletes.push(id);
    return super.delete(id, signal);
  }
}

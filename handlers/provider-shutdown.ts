import { inject, injectable } from 'tsyringe';
import { background, onCleanup } from '../framework/index.js';
import { PROVIDERS, type ProviderSet } from '../providers/registry.js';

/**
 * Closes the providers (SDK clients, sockets, mock proxies) when the operator stops: its
 * cleanup hook runs after the handlers have drained and the daemons have stopped, on every
 * replica, so a SIGTERM releases them before the process exits.
 */
@background()
@injectable()
export class ProviderShutdown {
  constructor(@inject(PROVIDERS) private readonly providers: ProviderSet) {}

  @onCleanup()
  async closeProviders(): Promise<void> {
    await this.providers.close();
  }
}

import { inject } from 'tsyringe';
import { background, onCleanup } from '../framework/index.js';
import type { ProviderSet } from '../providers/registry.js';
import { PROVIDERS } from './tokens.js';

/**
 * Closes the providers (SDK clients, sockets, mock proxies) when the operator stops: its
 * cleanup hook runs after the handlers have drained and the daemons have stopped, on every
 * replica, so a SIGTERM releases them before the process exits.
 */
@background()
export class ProviderShutdown {
  constructor(@inject(PROVIDERS) private readonly providers: ProviderSet) {}

  @onCleanup()
  async closeProviders(): Promise<void> {
    await this.providers.close();
  }
}

import { DiscoveryRunner } from './discovery-runner.js';
import { GatewayRunner } from './gateway-runner.js';
import { HealthRunner } from './health-runner.js';
import { OrphanSweep } from './orphan-sweep.js';
import { ProviderShutdown } from './provider-shutdown.js';
import { ProxyController } from './proxy-controller.js';

/**
 * The parts one image can run. controller: the reconciler, the orphan sweep and the health
 * engine (leader-elected: one replica acts); discovery: the lease API (every replica serves,
 * no leader needed); gateway: the forward proxy over the same lease book (every replica). A
 * process runs any of them.
 */
export type Component = 'controller' | 'discovery' | 'gateway';

/** The handler classes of the given components, in PROXY_HANDLERS order (ProviderShutdown last). */
export function handlersFor(components: readonly Component[]): Array<new (...args: never[]) => unknown> {
  const controller = components.includes('controller');
  const discovery = components.includes('discovery');
  return [
    ...(controller ? [ProxyController, HealthRunner] : []),
    ...(discovery ? [DiscoveryRunner] : []),
    ...(components.includes('gateway') ? [GatewayRunner] : []),
    ...(controller ? [OrphanSweep] : []),
    ProviderShutdown,
  ];
}

/** Whether the components need a leader (only the controller's parts act on one replica). */
export function needsLeader(components: readonly Component[]): boolean {
  return components.includes('controller');
}

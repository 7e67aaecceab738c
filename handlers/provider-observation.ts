import type { Proxy } from '../crds/proxy-types.js';
import type { Provider } from '../providers/contract.js';
import { isNotFound } from '../providers/errors.js';
import type { Observation } from './proxy-state-machine.js';

/**
 * What the provider says of the proxy's instance, for the state machine: found, gone, or none
 * recorded yet. With `inventory` (needsInventory, deletionNeedsInventory), an unprovisioned
 * proxy also lists its strays: this Proxy's instances of any revision, under this operator's
 * owner identity (`ownerID`), that an interrupted create left behind. Other provider errors
 * are thrown: the controller turns them into a failure step.
 */
export async function observeInstance(
  provider: Provider,
  proxy: Proxy,
  { inventory, ownerID, signal }: { inventory: boolean; ownerID: string; signal: AbortSignal },
): Promise<Observation> {
  const providerID = proxy.status?.providerID;
  if (!providerID) {
    if (!inventory) return { kind: 'unprovisioned' };
    const uid = proxy.metadata.uid ?? '';
    const strays = (await provider.listByTag(ownerID, signal)).filter((i) => i.uid === uid);
    return { kind: 'unprovisioned', strays };
  }
  try {
    return { kind: 'found', instance: await provider.get(providerID, signal) };
  } catch (err) {
    if (isNotFound(err)) return { kind: 'not-found' };
    throw err;
  }
}

// Deleting a Managed proxy: its instance (or an interrupted create's) goes before the finalizer.
import { type Proxy, SPEC_HASH_ANNOTATION } from '../../crds/proxy-types.js';
import { finish } from './status.js';
import { DELETE_POLL_SECONDS, type Observation, type Step } from './types.js';

/** Deleting with no instance recorded: list the ones a create may have made before it was recorded. */
export function deletionNeedsInventory(proxy: Proxy): boolean {
  return !proxy.status?.providerID && proxy.metadata.annotations?.[SPEC_HASH_ANNOTATION] !== undefined;
}

/**
 * Deleting a Managed proxy: delete its instance (or, with none recorded, the instances an
 * interrupted create may have left), poll until the provider says NotFound, then release.
 */
export function deletionStep(proxy: Proxy, observation: Observation): Step {
  const deleting = (ids: readonly string[]): Step =>
    finish(proxy, {
      action: { type: 'delete', providerIDs: ids },
      status: { phase: 'Deleting' },
      events: [{ type: 'Normal', reason: 'Deleting', message: `deleting instance ${ids.join(', ')}` }],
      logs: [{ level: 'info', message: 'deleting instance', fields: { providerIDs: ids } }],
      next: { kind: 'requeue', seconds: DELETE_POLL_SECONDS },
    });
  switch (observation.kind) {
    case 'found':
      return deleting([observation.instance.id]);
    case 'not-found':
      return finish(proxy, {
        action: { type: 'release' },
        logs: [
          {
            level: 'info',
            message: 'instance gone; releasing finalizer',
            fields: { providerID: proxy.status?.providerID },
          },
        ],
        next: { kind: 'steady' },
      });
    case 'unprovisioned': {
      const strays = observation.strays ?? [];
      if (strays.length) return deleting(strays.map((i) => i.id));
      return finish(proxy, { action: { type: 'release' }, next: { kind: 'steady' } });
    }
  }
}

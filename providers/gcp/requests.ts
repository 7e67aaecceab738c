import { LABEL_MANAGED, LABEL_OWNER, gcLabels, type CreateRequest } from '../contract.js';
import { instanceName } from '../naming.js';
import type { GcpInstance, InstanceRef } from './compute-api.js';
import type { GcpSettings } from './config.js';

/** AIP-160 filter for every instance this operator labelled. */
/** The list filter for one owner's managed instances (unowned and other owners' are never listed). */
export function ownedFilter(owner: string): string {
  return `labels.${LABEL_MANAGED} = "true" AND labels.${LABEL_OWNER} = "${owner}"`;
}

/** providerID = "<project>/<zone>/<instance>": all a later get/delete needs, no lookup. */
export function formatProviderID(ref: InstanceRef): string {
  return `${ref.project}/${ref.zone}/${ref.instance}`;
}

/** The instance reference in a providerID, or undefined if it is not one of ours. */
export function parseProviderID(providerID: string): InstanceRef | undefined {
  const parts = providerID.split('/');
  if (parts.length !== 3 || parts.some((p) => p === '')) return undefined;
  const [project, zone, instance] = parts;
  return { project, zone, instance };
}

/** The last path segment of a resource URL ("…/zones/europe-west1-b" → "europe-west1-b"). */
export function lastSegment(url: string | null | undefined): string {
  return (url ?? '').split('/').pop() ?? '';
}

export interface InsertPlan {
  ref: InstanceRef;
  instanceResource: GcpInstance;
}

/** Placement fields GCP cannot do without, in the order they are reported. */
const REQUIRED_PLACEMENT = ['zone', 'machineType', 'image'] as const;

/** The first missing placement field, e.g. "placement.zone", or undefined when complete. */
export function missingPlacement(req: CreateRequest): string | undefined {
  const missing = REQUIRED_PLACEMENT.find((field) => !req.placement[field]?.trim());
  return missing && `placement.${missing}`;
}

/**
 * The instances.insert request for a Proxy: ephemeral external IP (ONE_TO_ONE_NAT), the GC
 * labels, network tags and cloud-init as `user-data`. Call missingPlacement() first.
 */
export function buildInsert(req: CreateRequest, settings: GcpSettings): InsertPlan {
  const zone = req.placement.zone!;
  const name = instanceName(req.uid, req.revision);
  const network = settings.network.includes('/') ? settings.network : `global/networks/${settings.network}`;
  return {
    ref: { project: settings.project, zone, instance: name },
    instanceResource: {
      name,
      description: `proxy-operator Proxy ${req.proxy}`,
      machineType: `zones/${zone}/machineTypes/${req.placement.machineType}`,
      disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: req.placement.image } }],
      networkInterfaces: [{ network, accessConfigs: [{ type: 'ONE_TO_ONE_NAT', name: 'External NAT' }] }],
      tags: { items: [...settings.networkTags] },
      labels: gcLabels(req),
      metadata: { items: req.cloudInit ? [{ key: 'user-data', value: req.cloudInit }] : [] },
    },
  };
}

import { createHash } from 'node:crypto';
import type { ProxySpec } from '../crds/proxy-types.js';

/**
 * Hash of everything whose change means "replace the instance": placement (image
 * included), the cloud-init content as resolved (a Secret's data, not its name), the port
 * and the credentials (their fingerprint: a rotated Secret replaces the instance). Attributes,
 * maxLeases and healthCheck are deliberately absent: changing them never replaces a VM.
 */
export function specHash(
  spec: Pick<ProxySpec, 'placement' | 'port'>,
  cloudInit: string | undefined,
  credentialsFingerprint?: string,
): string {
  const p = spec.placement ?? {};
  const canonical = JSON.stringify([
    p.region ?? '',
    p.zone ?? '',
    p.machineType ?? '',
    p.image ?? '',
    spec.port,
    cloudInit ?? null,
    // Appended only when present, so hashes of instances made without credentials stay put.
    ...(credentialsFingerprint === undefined ? [] : [credentialsFingerprint]),
  ]);
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

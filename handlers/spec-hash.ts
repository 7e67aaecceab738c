import type { ProxySpec } from '../crds/proxy-types.js';
import type { ProxyCredentials } from '../providers/contract.js';
import {
  credentialsFingerprint,
  keyedHash,
  legacyCredentialsFingerprint,
  legacyHash,
} from './credentials-digest.js';

type SpecPart = Pick<ProxySpec, 'placement' | 'port'>;

/**
 * Everything whose change means "replace the instance": placement (image included), the
 * cloud-init content as resolved (a Secret's data, not its name), the port and the credentials
 * (their fingerprint: a rotated Secret replaces the instance). Attributes, maxLeases and
 * healthCheck are deliberately absent: changing them never replaces a VM.
 */
function canonical(spec: SpecPart, cloudInit: string | undefined, fingerprint: string | undefined): string {
  const p = spec.placement ?? {};
  return JSON.stringify([
    p.region ?? '',
    p.zone ?? '',
    p.machineType ?? '',
    p.image ?? '',
    spec.port,
    cloudInit ?? null,
    // Appended only when present, so hashes of instances made without credentials stay put.
    ...(fingerprint === undefined ? [] : [fingerprint]),
  ]);
}

/**
 * The spec hash: an HMAC under the operator's credentials key (credentials-digest.ts), so the
 * annotation, readable by whoever reads Proxies, is no test of a guessed password or of a
 * cloud-init Secret's content.
 */
export function specHash(
  spec: SpecPart,
  cloudInit: string | undefined,
  credentials: ProxyCredentials | undefined,
  key: Buffer,
): string {
  return keyedHash(canonical(spec, cloudInit, credentials && credentialsFingerprint(credentials, key)), key);
}

/** The unkeyed spec hash earlier versions recorded: compared once after an upgrade, never written. */
export function legacySpecHash(
  spec: SpecPart,
  cloudInit: string | undefined,
  credentials: ProxyCredentials | undefined,
): string {
  return legacyHash(canonical(spec, cloudInit, credentials && legacyCredentialsFingerprint(credentials)));
}

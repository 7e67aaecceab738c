import { createHash } from 'node:crypto';

/** Hex digits of the UID hash kept in a name: 48 bits, ample for a fleet of tens. */
const HASH_CHARS = 12;

/** Characters of the spec revision kept in a name. */
const REVISION_CHARS = 8;

/**
 * The deterministic instance name for a Proxy UID (and the spec revision it is built from):
 * 'proxy-' + a short lowercase hex hash of the UID, then '-' + the revision's first
 * characters. Deterministic so a create repeated after a crash finds the instance it already
 * made; a new revision (a replacement) gets a new name. Valid as a GCP instance name
 * (RFC 1035, <= 63) and as a Pod name (DNS-1123).
 */
export function instanceName(uid: string, revision?: string): string {
  if (typeof uid !== 'string' || uid.trim() === '') {
    throw new Error('instanceName: the Proxy UID is empty; an instance needs its owner UID to be named');
  }
  const base = `proxy-${createHash('sha256').update(uid).digest('hex').slice(0, HASH_CHARS)}`;
  if (!revision) return base;
  const suffix = revision
    .toLowerCase()
    .replace(/[^0-9a-z]/g, '')
    .slice(0, REVISION_CHARS);
  return suffix ? `${base}-${suffix}` : base;
}
